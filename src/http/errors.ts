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
