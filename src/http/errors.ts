/**
 * The closed set of error codes and their HTTP statuses (../shared/spec/DECISIONS.md,
 * "Errors and HTTP statuses"). Services return or throw `ServiceError`; the HTTP and MCP
 * edges turn it into an envelope or an `isError` tool result.
 */
export const ERROR_STATUS = {
  INVALID_PARAMETER: 400,
  UNAUTHORIZED: 401,
  TIER_REQUIRED: 403,
  NOT_FOUND: 404,
  KEY_LIMIT_REACHED: 409,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

/** A machine-readable error code. */
export type ErrorCode = keyof typeof ERROR_STATUS;

/** An expected failure with a code from the closed set, a human message and optional details. */
export class ServiceError extends Error {
  override name = 'ServiceError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** 404 for an unknown asset or chain; the message names what was asked for, as given. */
export function assetNotFound(asked: string): ServiceError {
  return new ServiceError('NOT_FOUND', `Asset '${asked}' not found`);
}

/** PostgreSQL error classes and client errors that mean the database is unreachable or gone. */
const DB_DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EPIPE', '57P01', '57P02', '57P03', '3D000', '53300']);

/**
 * True when `err` (or its cause, e.g. a DrizzleQueryError around a pg error) says a
 * dependency is down rather than that the request or the code is wrong: such errors are
 * answered 503 SERVICE_UNAVAILABLE (DECISIONS.md), not 500.
 */
export function isDependencyDown(err: unknown): boolean {
  for (let e = err as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    const code = typeof e.code === 'string' ? e.code : '';
    if (DB_DOWN_CODES.has(code) || code.startsWith('08')) return true;
    const msg = typeof e.message === 'string' ? e.message : '';
    if (/Cannot use a pool after calling end|Connection terminated|connect ECONNREFUSED|PGlite is closed/i.test(msg)) return true;
  }
  return false;
}

/**
 * What of an unexpected error goes to the log: a DrizzleQueryError's message carries the
 * query parameters (key digests, user ids, emails), so only its cause is logged.
 */
export function loggableError(err: unknown): unknown {
  const e = err as { name?: unknown; cause?: unknown; message?: unknown };
  if (e?.name === 'DrizzleQueryError' || (typeof e?.message === 'string' && e.message.startsWith('Failed query:'))) {
    const c = e.cause as { code?: unknown; message?: unknown; severity?: unknown } | undefined;
    return { type: 'DrizzleQueryError', code: c?.code, message: c?.message, severity: c?.severity };
  }
  return err;
}
