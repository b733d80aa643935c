/**
 * An answer with its JSON text (memoized answers are not serialized again on every request)
 * and whether it came from a cache filled before this call (`meta.cached`).
 */
export interface Served<T> {
  value: T;
  json: string;
  cached: boolean;
}

/** Wraps a freshly computed value (not from a cache). */
export function fresh<T>(value: T): Served<T> {
  return { value, json: JSON.stringify(value), cached: false };
}
