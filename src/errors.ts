/**
 * The closed set of error codes and their HTTP statuses (README, "Errors"). Framework-free:
 * services throw `ServiceError`; the HTTP edge turns it into the error envelope, the MCP edge
 * into an `isError` tool result with the same `{code, message, details?}`.
 */
export const ERROR_STATUS = {
  INVALID_PARAMETER: 400,
  UNAUTHORIZED: 401,
  TIER_REQUIRED: 403,
  NOT_FOUND: 404,
  KEY_LIMIT_REACHED: 409,
  THESIS_LIMIT_REACHED: 409,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

/** A machine-readable error code. */
export type ErrorCode = keyof typeof ERROR_STATUS;

/** Every error code, in status order (the OpenAPI enum of `error.code`). */
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** An expected failure with a code from the closed set, a human message and optional details. */
export class ServiceError extends Error {
  override name = 'ServiceError';
  /**
   * A 5xx that is a known state of the data, not a fault (a thesis's asset without a current
   * signal): logged as a warning, not an error, so that a stopped source does not flood the
   * error log with one line per request.
   */
  readonly expected: boolean;
  /**
   * For an INVALID_PARAMETER that names one field (`details.field`): what is wrong with the
   * value and what to send, without the surface's noun, so that each surface can word the
   * message its own way ("Invalid query parameter 'end': ..." over REST, "Invalid argument
   * 'end': ..." over MCP; see `invalidField` and `fieldMessage`).
   */
  readonly reason: string | undefined;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    options: { expected?: boolean; reason?: string; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.expected = options.expected ?? false;
    this.reason = options.reason;
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/**
 * 400 INVALID_PARAMETER for one named input refused by a service (a value the schema accepts
 * but the data refuses: an `end` after the as-of day, a stop already hit). The message reads
 * "Invalid parameter 'FIELD': REASON" until a surface rewords it with its own noun
 * (`fieldMessage`): services know no HTTP or MCP.
 * @param field the input's name, dotted for nested fields (`conditions.0.metric`).
 * @param reason what is wrong and what to send instead.
 * @param details more machine-readable details; `field` is added.
 */
export function invalidField(field: string, reason: string, details: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('INVALID_PARAMETER', fieldMessage('parameter', field, reason), { field, ...details }, { reason });
}

/**
 * "Invalid NOUN 'FIELD': REASON", the one form of every refused-field message (REST's schema
 * errors, services' `invalidField`, MCP's argument errors).
 * @param noun what the surface calls an input: `query parameter`, `body field`, `argument`.
 */
export function fieldMessage(noun: string, field: string, reason: string): string {
  return `Invalid ${noun}${field ? ` '${field}'` : ''}: ${reason}`;
}

/**
 * `err` worded for a surface: an `invalidField` error whose message names the input with
 * `noun` (REST: where the request carried it; MCP: `argument`); any other error as is.
 */
export function reworded(err: ServiceError, noun: string, details: Record<string, unknown> = {}): ServiceError {
  const field = err.details?.field;
  // Already worded by a surface (it carries the location it named): left as it is.
  if (err.reason === undefined || typeof field !== 'string' || err.details?.location !== undefined) return err;
  const out = new ServiceError(
    err.code,
    fieldMessage(noun, field, err.reason),
    { ...details, ...err.details },
    {
      expected: err.expected,
      reason: err.reason,
    },
  );
  out.stack = err.stack;
  return out;
}

/**
 * 404 for an unknown asset: the message names what was asked for, as given, and the assets
 * there are (id and ticker); `details.assets` lists their ids.
 * @param assets the supported assets, id and ticker (providers/assets.ts ASSETS).
 */
export function assetNotFound(asked: string, assets: readonly { asset: string; symbol: string }[]): ServiceError {
  const list = assets.map((a) => `${a.asset} (${a.symbol})`).join(', ');
  return new ServiceError(
    'NOT_FOUND',
    `Asset '${asked}' not found: use one of ${list}, by id or ticker (GET /api/v1/assets and the MCP tool get_assets list them)`,
    {
      assets: assets.map((a) => a.asset),
    },
  );
}

/**
 * 404 for a chain-health or chain-metrics request on anything but a covered chain: the
 * message names what was asked for, as given, and the chains there are; `details.chains`
 * lists their ids.
 * @param chains the covered chains, id and name (providers/assets.ts CHAINS).
 */
export function chainNotFound(asked: string, chains: readonly { chain: string; name: string }[]): ServiceError {
  const list = chains.map((c) => `${c.chain} (${c.name})`);
  const named = list.length > 1 ? `${list.slice(0, -1).join(', ')} and ${list.at(-1)}` : (list[0] ?? '');
  return new ServiceError(
    'NOT_FOUND',
    `No chain data for '${asked}': chain health and metrics cover the chains ${named}; use one of these ids (or the chain's asset id or ticker)`,
    { chains: chains.map((c) => c.chain) },
  );
}

/**
 * PostgreSQL error classes and client errors that mean the database is unreachable, gone or
 * too slow: 57014 statement_timeout, 55P03 lock_timeout, 25P03 idle_in_transaction_session_timeout,
 * 57P01-57P04 shutdown, crash, cannot connect now, database dropped, 3D000 no such database,
 * 28000/28P01 the role may not log in or its password is refused (class 08, connection
 * exceptions, and class 53, insufficient resources such as too many connections or a full disk,
 * are matched by prefix; 55000 only as "not currently accepting connections").
 */
const DB_DOWN_CODES = new Set([
  '57014',
  '55P03',
  '25P03',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '57P04',
  '3D000',
  '28000',
  '28P01',
]);

/** One link of an error's cause chain as `causes` yields it: its `code` and `message` ('' when not strings) and the link itself. */
export interface CauseLink {
  code: string;
  message: string;
  error: object;
}

/**
 * `err` and its causes (`cause`, e.g. a DrizzleQueryError, then the pg error inside it),
 * outermost first, at most `max` links (a cycle or a very deep chain ends there); stops at the
 * first link that is not an object.
 */
export function* causes(err: unknown, max = 4): Generator<CauseLink> {
  let e = err as { code?: unknown; message?: unknown; cause?: unknown } | null | undefined;
  for (let depth = 0; e && typeof e === 'object' && depth < max; depth++, e = e.cause as typeof e)
    yield { code: typeof e.code === 'string' ? e.code : '', message: typeof e.message === 'string' ? e.message : '', error: e };
}

/**
 * True when `err` (or its cause, e.g. a DrizzleQueryError around a pg error) says a
 * dependency is down rather than that the request or the code is wrong: such errors are
 * answered 503 SERVICE_UNAVAILABLE, not 500.
 */
export function isDependencyDown(err: unknown): boolean {
  for (const { code, message: msg } of causes(err)) {
    if (DB_DOWN_CODES.has(code) || /^(08|53)/.test(code)) return true;
    // ALTER DATABASE ... ALLOW_CONNECTIONS false (55000 is otherwise a programming error).
    if (code === '55000' && /not currently accepting connections/i.test(msg)) return true;
    if (
      /Cannot use a pool after calling end|Connection terminated|connect ECONNREFUSED|PGlite is closed|Query read timeout|timeout exceeded when trying to connect/i.test(
        msg,
      )
    )
      return true;
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

/** The message of a 503 caused by the database being unreachable (REST and MCP alike). */
export const DATABASE_DOWN_MESSAGE = 'The service cannot reach its database; try again shortly';

/**
 * How long a client should wait before trying again after a 503 caused by a dependency that is
 * down (the database, the identity provider), s: the `Retry-After` header (RFC 9110 section
 * 10.2.3) and `details.retry_after` of such an answer. 5 s is also how long a failed identity
 * provider is kept before it is asked again (auth/jwt.ts IDP_RETRY_MS, auth/identity-lazy.ts).
 */
export const DEPENDENCY_RETRY_AFTER_SEC = 5;

/**
 * 503 SERVICE_UNAVAILABLE for a passing failure (a dependency down, a computation that failed):
 * `details.retry_after` is the wait in seconds before trying again, which each surface also
 * sends as `Retry-After` (REST, the dashboard's routes and MCP over HTTP; `retryAfterOf`).
 * @param retryAfterSec the wait, s (default DEPENDENCY_RETRY_AFTER_SEC).
 * @param cause the underlying error, kept for the log (never sent).
 */
export function unavailable(message: string, retryAfterSec = DEPENDENCY_RETRY_AFTER_SEC, cause?: unknown): ServiceError {
  return new ServiceError('SERVICE_UNAVAILABLE', message, { retry_after: retryAfterSec }, { cause });
}

/**
 * The `Retry-After` value of a refused answer, s: `details.retry_after` of a 429 RATE_LIMITED
 * (a window ran out) or of a 503 SERVICE_UNAVAILABLE made by `unavailable`; undefined for any
 * other answer (a 503 that is a state of the data, such as a thesis's asset without a current
 * signal, names no wait).
 */
export function retryAfterOf(code: ErrorCode, details: Record<string, unknown> | undefined): number | undefined {
  if (code !== 'RATE_LIMITED' && code !== 'SERVICE_UNAVAILABLE') return undefined;
  const v = details?.retry_after;
  return typeof v === 'number' ? v : undefined;
}

/**
 * Classifies an unexpected error (not a ServiceError): a dependency that is down becomes 503
 * SERVICE_UNAVAILABLE (`unavailable`: try again in DEPENDENCY_RETRY_AFTER_SEC), anything else
 * 500 INTERNAL_ERROR without internals.
 */
export function unexpectedError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  if (isDependencyDown(err)) return unavailable(DATABASE_DOWN_MESSAGE);
  return new ServiceError('INTERNAL_ERROR', 'Internal server error');
}

/**
 * Memoizes an asynchronous creation (a module load, a provider): calls share one promise
 * while it runs and after it succeeded. A failure is not kept for good: calls within
 * `retryMs` of it get the same rejection (default 0: the next call tries again), later calls
 * create anew. `onError` hears each failed creation once.
 * @returns the memoized getter.
 */
export function memoRetrying<T>(
  create: () => Promise<T>,
  opts: { retryMs?: number; onError?: (err: unknown) => void } = {},
): () => Promise<T> {
  const retryMs = opts.retryMs ?? 0;
  let created: Promise<T> | null = null;
  let failed: { err: unknown; at: number } | null = null;
  return () => {
    if (created) return created;
    if (failed && Date.now() - failed.at < retryMs) return Promise.reject(failed.err);
    const attempt = create();
    created = attempt;
    attempt.then(
      () => {
        failed = null;
      },
      (err: unknown) => {
        if (created === attempt) created = null;
        failed = { err, at: Date.now() };
        opts.onError?.(err);
      },
    );
    return attempt;
  };
}

/**
 * The log of a dependency's outage (the database, Redis, the identity provider's keys) without
 * a line per failed request: while it lasts every request answers 503, and one error line each
 * buried the log. The first failure is logged at once; after it, at most one line per
 * `everyMs` (default 10 s), which counts the failures since the last line in `more` (so the
 * rate shows) and carries the latest error. One instance per service, shared by REST, MCP and
 * the dashboard.
 */
export class OutageLog {
  #last = -Infinity;
  #more = 0;
  /** The latest failure counted and not written yet: written by `flush`. */
  #latest: { log: { error(obj: object, msg: string): void }; err: unknown; msg: string; extra: Record<string, unknown> } | null = null;
  #timer: NodeJS.Timeout | null = null;

  /** @param now the clock, ms (tests). */
  constructor(
    private readonly everyMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Logs `err` (already made loggable: `loggableError`) at error level with `msg`, or counts it
   * when a line was written less than `everyMs` ago; the count is written by the next line, or
   * by `flush` once `everyMs` has passed (a timer), so the end of an outage is not lost.
   * @param log the request's logger (its line carries the request id), or the process logger.
   */
  error(log: { error(obj: object, msg: string): void }, err: unknown, msg: string, extra: Record<string, unknown> = {}): void {
    const t = this.now();
    if (t - this.#last < this.everyMs) {
      this.#more++;
      this.#latest = { log, err, msg, extra };
      this.#timer ??= setTimeout(() => this.flush(), this.everyMs - (t - this.#last)).unref();
      return;
    }
    this.#write(log, err, msg, extra, t);
  }

  /** Writes the failures counted since the last line, if any, as one line with the latest error. */
  flush(): void {
    const latest = this.#latest;
    // #write clears the timer; with nothing to write, it is cleared here.
    if (latest && this.#more > 0) this.#write(latest.log, latest.err, latest.msg, latest.extra, this.now(), true);
    else if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  #write(
    log: { error(obj: object, msg: string): void },
    err: unknown,
    msg: string,
    extra: Record<string, unknown>,
    t: number,
    counted = false,
  ): void {
    // `counted`: this line reports only the failures counted before (the latest's error); else it is a new failure's.
    const more = this.#more - (counted ? 1 : 0);
    const since = Math.round((t - this.#last) / 1000);
    this.#last = t;
    this.#more = 0;
    this.#latest = null;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    log.error({ err, ...extra, ...(more ? { more } : {}) }, more ? `${msg} (${more} more since the previous line, ${since} s ago)` : msg);
  }
}

/**
 * How long after the first stop signal a SIGINT is still taken for the same Ctrl+C, ms. A
 * terminal sends SIGINT to its whole process group, and `npm start` / `npm run` forward their
 * own to the service, so one Ctrl+C reaches it twice within milliseconds (seen: it was taken
 * for a second Ctrl+C, which exits at once, cutting off requests in flight and the last usage
 * flush). `serve` and `mcp --stdio` exit at once only on a SIGINT later than this.
 */
export const SAME_CTRL_C_MS = 1000;

/**
 * The reason a start-up was ended early: SIGTERM or SIGINT came while the core was still
 * starting (`serve`, `mcp --stdio`), and `createCore`'s `signal` was aborted with it. Not a failure: the command exits 0. `message` is what requests still waiting are told.
 */
export class StartupStopped extends Error {
  /** The log line of a start-up ended by a stop (`serve`, `mcp --stdio`; the tests match it). */
  static readonly LOG_LINE = 'stopped during start-up (the database was closed cleanly)';

  override name = 'StartupStopped';
  constructor(message = 'The service was stopped while it was starting') {
    super(message);
  }
}
