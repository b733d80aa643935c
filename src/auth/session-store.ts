import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type { BetterAuthOptions, DBAdapter, Where } from 'better-auth';
import { isDependencyDown } from '../errors.ts';

/**
 * How the embedded identity provider stores sign-in sessions and reports its database's
 * failures (used by src/auth/identity.ts).
 *
 * Session tokens are bearer secrets (cookie `session_token`, `Authorization: Bearer`,
 * `set-auth-token`): whoever reads one can get JWTs and create API keys. So `auth_session.token`
 * holds only their SHA-256 digest (lower-case hex, 64 characters), like API keys
 * (`api_keys.key_hash`). A token is 32 random characters from better-auth (about 190 bits),
 * so an unsalted fast digest is enough: there is nothing to guess.
 */

/** The stored form of a session token: SHA-256, lower-case hex (64 characters). */
export function sessionTokenDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A stored session token is a digest when it matches this; anything else is a clear token from before digests. */
export const SESSION_DIGEST_PATTERN = '^[0-9a-f]{64}$';

/** Per request: whether a database call failed because the database is unreachable. */
interface RequestState {
  databaseDown: boolean;
}

const requestState = new AsyncLocalStorage<RequestState>();

/** The storage trackDatabase uses, to disable when no identity request is in flight (see context-gate.ts). */
export const trackingStorage: { disable(): void } = requestState;

/**
 * Runs `fn` (one identity-provider request) and tells whether a database call made during it
 * failed because the database is unreachable (see isDependencyDown in src/errors.ts), even
 * when better-auth swallowed the error (it answers 401 on `/auth/token` then).
 */
export async function trackDatabase<T>(fn: () => Promise<T>): Promise<{ result: T; databaseDown: boolean }> {
  const state: RequestState = { databaseDown: false };
  const result = await requestState.run(state, fn);
  return { result, databaseDown: state.databaseDown };
}

/**
 * What a failed identity-database call throws instead of the driver's error: the driver's
 * message carries the SQL and its parameters (session tokens, emails), which better-auth would
 * log; this carries only the SQLSTATE or socket error code.
 */
export class IdentityDatabaseError extends Error {
  override name = 'IdentityDatabaseError';
  constructor(
    readonly code: string | undefined,
    readonly unavailable: boolean,
  ) {
    super(`identity database ${unavailable ? 'unavailable' : 'query failed'}${code ? ` (code ${code})` : ''}`);
  }
}

/** The SQLSTATE or socket code of a driver error (or of its cause), if any. */
function errorCode(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, d = 0; e && d < 4; e = e.cause as typeof e, d++) {
    if (typeof e.code === 'string') return e.code;
  }
  return undefined;
}

const SESSION_MODELS = new Set(['session', 'auth_session']);

type AnyArgs = { model: string; where?: Where[]; data?: Record<string, unknown>; update?: Record<string, unknown> };

/**
 * Wraps a better-auth database adapter factory (e.g. `drizzleAdapter(db, ...)`) so that
 *
 * - session tokens are stored and looked up as digests: `token` in the data of a created
 *   session and in every `where` on the session model (`eq` and `in`) is replaced by
 *   `sessionTokenDigest(token)`; in what comes back, a digest whose token was given in the
 *   same call is replaced by that token again, so better-auth (cookie refresh, sign-out,
 *   the bearer plugin) keeps working with the token it knows. Rows read without their token
 *   (a user's session list) carry the digest, which is no credential.
 * - every failure is rethrown as an IdentityDatabaseError (no SQL, no parameters) and, when
 *   the database is unreachable, recorded for the current request (trackDatabase).
 *
 * Transactions are wrapped too (better-auth runs some writes through `transaction`).
 */
export function digestSessionTokens(factory: (options: BetterAuthOptions) => DBAdapter<BetterAuthOptions>) {
  return (options: BetterAuthOptions): DBAdapter<BetterAuthOptions> => wrapAdapter(factory(options));
}

/** Rethrows a driver error as an IdentityDatabaseError, recording an outage for the current request. */
function sanitize(err: unknown): never {
  if (err instanceof IdentityDatabaseError) throw err;
  // better-auth's own errors (APIError) pass through unchanged.
  if ((err as { name?: unknown })?.name === 'APIError') throw err;
  const unavailable = isDependencyDown(err);
  const state = requestState.getStore();
  if (unavailable && state) state.databaseDown = true;
  throw new IdentityDatabaseError(errorCode(err), unavailable);
}

function wrapAdapter<A extends DBAdapter<BetterAuthOptions>>(inner: A): A {
  const call = <R>(name: string, args: AnyArgs, run: (a: AnyArgs) => Promise<R>): Promise<R> => {
    const isSession = SESSION_MODELS.has(args.model);
    const known = new Map<string, string>();
    const digest = (v: unknown): unknown => {
      if (typeof v !== 'string') return v;
      const d = sessionTokenDigest(v);
      known.set(d, v);
      return d;
    };
    let a = args;
    if (isSession) {
      a = { ...args };
      if (args.where) {
        a.where = args.where.map((w) =>
          w.field === 'token' ? { ...w, value: Array.isArray(w.value) ? w.value.map(digest) : digest(w.value) } : w,
        ) as Where[];
      }
      if (name === 'create' && args.data && 'token' in args.data) a.data = { ...args.data, token: digest(args.data.token) };
      if (args.update && 'token' in args.update) a.update = { ...args.update, token: digest(args.update.token) };
    }
    const restore = (row: unknown): unknown => {
      if (!row || typeof row !== 'object') return row;
      const r = row as { token?: unknown };
      if (typeof r.token === 'string' && known.has(r.token)) return { ...r, token: known.get(r.token) };
      return row;
    };
    return run(a).then(
      (res) => (isSession && known.size > 0 ? ((Array.isArray(res) ? res.map(restore) : restore(res)) as R) : res),
      sanitize,
    );
  };
  const wrapped: Record<string, unknown> = { ...inner };
  for (const name of [
    'create',
    'findOne',
    'findMany',
    'count',
    'update',
    'updateMany',
    'delete',
    'deleteMany',
    'consumeOne',
    'incrementOne',
  ]) {
    const fn = (inner as unknown as Record<string, unknown>)[name];
    if (typeof fn !== 'function') continue;
    wrapped[name] = (args: AnyArgs) => call(name, args, (a) => (fn as (x: AnyArgs) => Promise<unknown>).call(inner, a));
  }
  if (typeof inner.transaction === 'function') {
    wrapped.transaction = <R>(cb: (trx: A) => Promise<R>) =>
      inner.transaction((trx) => cb(wrapAdapter(trx as unknown as A))).catch(sanitize);
  }
  return wrapped as unknown as A;
}
