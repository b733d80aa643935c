import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isoFormatter } from '../engine/util.ts';
import { ERROR_CODES, type ErrorCode, retryAfterOf, type ServiceError } from '../errors.ts';
import { Day, Instant } from '../services/schemas/common.ts';

/**
 * The as-of day for `meta.as_of`: a value, or a function read at each response (the live
 * ingest moves the as-of day while the service runs).
 */
export type AsOf = string | null | (() => string | null);

/** The current value of an AsOf. */
export function resolveAsOf(asOf: AsOf): string | null {
  return typeof asOf === 'function' ? asOf() : asOf;
}

/** `meta` of every v1 response (README, "REST API v1"). */
export interface Meta {
  /** ISO 8601 UTC with milliseconds. */
  timestamp: string;
  version: 'v1';
  /** True when the data was served from a cache filled before this request. */
  cached: boolean;
  request_id: string;
  /** The service's as-of day (newest data visible), YYYY-MM-DD. */
  as_of: string | null;
}

export const MetaSchema = z.object({
  timestamp: Instant,
  version: z.literal('v1'),
  cached: z.boolean(),
  // The X-Request-Id header's value (app.ts genReqId: randomUUID()).
  request_id: z.string().meta({ format: 'uuid' }),
  as_of: Day.nullable(),
});

/** Zod schema of a success envelope around `data`. */
export function okEnvelope<T extends z.ZodType>(data: T) {
  return z.object({ status: z.literal('ok'), data, meta: MetaSchema });
}

export const ErrorEnvelopeSchema = z.object({
  status: z.literal('error'),
  data: z.null(),
  error: z.object({
    code: z.enum(ERROR_CODES).describe('Machine-readable error code (closed set)'),
    message: z.string().describe('What went wrong and what to do next'),
    details: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('Structured context, e.g. the field, the required tiers, the rate-limit window'),
  }),
  meta: MetaSchema,
});

/** `meta.timestamp` of the responses of the current millisecond. */
const timestampText = isoFormatter();

/**
 * The `meta` of a response as JSON text (the fields of `Meta`, in order), written directly:
 * the timestamp is ISO 8601 and needs no escaping; the request id and as-of are quoted.
 */
function metaJson(req: FastifyRequest, cached: boolean, asOf: AsOf): string {
  return (
    `{"timestamp":"${timestampText(Date.now())}","version":"v1","cached":${cached},` +
    `"request_id":${JSON.stringify(String(req.id))},"as_of":${JSON.stringify(resolveAsOf(asOf))}}`
  );
}

/**
 * Sends a success envelope around already-serialized `dataJson` (the payload is built by
 * string concatenation so memoized answers are not serialized again on every request).
 */
export function sendOk(
  req: FastifyRequest,
  reply: FastifyReply,
  dataJson: string,
  cached: boolean,
  asOf: AsOf,
  status = 200,
): FastifyReply {
  const body = `{"status":"ok","data":${dataJson},"meta":${metaJson(req, cached, asOf)}}`;
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/**
 * Sends an error envelope (`data: null`, `error`, `meta`), never cached, with `Retry-After`
 * when the error names a wait (`details.retry_after` of a 429 or a passing 503: errors.ts
 * `retryAfterOf`).
 */
export function sendError(
  req: FastifyRequest,
  reply: FastifyReply,
  status: number,
  code: ErrorCode,
  message: string,
  details: Record<string, unknown> | undefined,
  asOf: AsOf,
): FastifyReply {
  const error = details ? { code, message, details } : { code, message };
  const body = `{"status":"error","data":null,"error":${JSON.stringify(error)},"meta":${metaJson(req, false, asOf)}}`;
  const wait = retryAfterOf(code, details);
  if (wait !== undefined) reply.header('Retry-After', String(wait));
  // Errors are never cached (a 429 or 401 is about this request, not the resource).
  return reply.code(status).header('Cache-Control', 'no-store').type('application/json; charset=utf-8').send(body);
}

/** Sends a ServiceError as the error envelope with its status. */
export function sendServiceError(req: FastifyRequest, reply: FastifyReply, err: ServiceError, asOf: AsOf): FastifyReply {
  return sendError(req, reply, err.status, err.code, err.message, err.details, asOf);
}
