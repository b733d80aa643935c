/**
 * A `timestamp with time zone` column read in drizzle's `string` mode (PostgreSQL's text
 * form, e.g. `2026-11-27 17:35:07.887+00`) as ISO 8601 UTC with milliseconds
 * (`2026-11-27T17:35:07.887Z`), the form every timestamp of the API has; null stays null.
 * @throws RangeError (from Date.prototype.toISOString) when `ts` is not a timestamp.
 */
export function isoTimestamp(ts: string): string;
export function isoTimestamp(ts: string | null): string | null;
export function isoTimestamp(ts: string | null): string | null {
  return ts === null ? null : new Date(ts).toISOString();
}
