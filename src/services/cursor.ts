import { isCalendarDay } from '../engine/util.ts';
import { invalidField } from '../errors.ts';

/**
 * The opaque `cursor` of a paged list (GET /thesis, GET /keys): the position of the previous
 * page's last row, as the repository gives it, base64url-encoded. Clients pass a page's
 * `next_cursor` back unchanged.
 */
export interface ListPosition {
  /** Creation time of the row, UTC to the microsecond (`YYYY-MM-DD HH24:MI:SS.US`, PostgreSQL's to_char). */
  position: string;
  /** The row's id (a UUID): orders rows created in the same microsecond. */
  id: string;
  /** A leading sort group, when the list has one (GET /keys: 1 active, 0 revoked). */
  rank?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const POSITION = /^(\d{4}-\d{2}-\d{2}) ([01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{6}$/;

/** The `next_cursor` of a page whose last row is at `p`. */
export function encodeCursor(p: ListPosition): string {
  return Buffer.from(p.rank === undefined ? `${p.position}|${p.id}` : `${p.rank}|${p.position}|${p.id}`).toString('base64url');
}

/**
 * The position a cursor names. `ranked`: whether the list's cursors carry a rank (0 or 1).
 * @throws ServiceError INVALID_PARAMETER (field `cursor`) when `cursor` is not one
 *   `encodeCursor` made for such a list.
 */
export function decodeCursor(cursor: string, ranked: boolean): ListPosition {
  const parts = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const rank = ranked ? parts.shift() : undefined;
  const [position = '', id = '', ...rest] = parts;
  const day = POSITION.exec(position)?.[1];
  if (
    rest.length > 0 ||
    (ranked && rank !== '0' && rank !== '1') ||
    day === undefined ||
    day < '1970-01-01' ||
    !isCalendarDay(day) ||
    !UUID.test(id)
  )
    throw invalidField(
      'cursor',
      // Also a cursor of the other list (GET /keys, GET /thesis), which the service did give.
      "not a next_cursor of this list; pass the next_cursor of this list's previous page back unchanged, or leave cursor out for the first page",
    );
  return ranked ? { rank: Number(rank), position, id } : { position, id };
}
