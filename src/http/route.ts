import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { ERROR_STATUS, reworded, ServiceError, type ErrorCode } from '../errors.ts';
import type { Policy } from '../services/access.ts';
import type { Operation, Served, Services } from '../services/operation.ts';
import { closedObject } from '../services/schemas/common.ts';
import { applyCaching } from './caching.ts';
import { ErrorEnvelopeSchema, sendOk, type AsOf } from './envelope.ts';
import { successEnvelope } from './openapi.ts';

/** The parts of a request a route maps to its operation's input. */
export interface RouteParts {
  params: Record<string, unknown>;
  query: Record<string, unknown>;
  body: unknown;
}

/** How a REST route asks an operation: path, parsing, and the mapping to the operation's input. */
export interface RouteSpec {
  method: 'GET' | 'POST' | 'DELETE';
  /** Path under /api/v1, Fastify syntax (`/signals/:asset`). */
  url: string;
  params?: z.ZodObject;
  /** The query parameters; any other is refused (400 naming it and the accepted ones). */
  querystring?: z.ZodObject;
  body?: z.ZodType;
  /** Maps the parsed request to the operation's input (default: params, query and body merged). */
  input?(r: RouteParts): unknown;
  /** Leave the route out of the OpenAPI document (the dashboard's copies of the routes). */
  hide?: boolean;
}

/** The OpenAPI security requirement of a policy (the schemes are declared in app.ts). */
export function securityOf(policy: Policy): Record<string, string[]>[] {
  switch (policy.name) {
    case 'public':
      return [{ bearerApiKey: [] }, {}];
    case 'api-key':
      return [{ bearerApiKey: [] }];
    case 'api-key-or-user':
      return [{ bearerApiKey: [] }, { bearerJwt: [] }];
    case 'user':
      return [{ bearerJwt: [] }];
  }
}

/** Error codes every operation can answer: bad input, credentials, quota, and the server's own failures. */
const ALWAYS: readonly ErrorCode[] = ['INVALID_PARAMETER', 'UNAUTHORIZED', 'RATE_LIMITED', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE'];

/** The error codes an operation can answer, by its policy and its own `errors`. */
export function errorCodesOf(op: Operation): ErrorCode[] {
  const codes = new Set<ErrorCode>([...ALWAYS, ...(op.errors ?? [])]);
  if (op.policy.tiers) codes.add('TIER_REQUIRED');
  return [...codes].sort((a, b) => ERROR_STATUS[a] - ERROR_STATUS[b]);
}

/** What each request part calls an input, in error messages: `Invalid query parameter 'days': ...`. */
export const LOCATION_NOUN: Record<string, string> = {
  querystring: 'query parameter',
  params: 'path parameter',
  body: 'body field',
  headers: 'header',
};

/**
 * A service's INVALID_PARAMETER names the refused input by `details.field` only (services know
 * no HTTP); this adds the `location` the request carried it in (`params`, `querystring` or
 * `body`, as the schema validation's errors say) and words the message with that location's
 * noun, so that a value refused by the service (an `end` after the as-of day) reads like one
 * refused by the route's schema (an `end` that is not a day): "Invalid query parameter 'end':
 * ...". Any other error, or one whose field the request does not carry, is returned as is.
 */
export function withLocation(err: unknown, parts: RouteParts): unknown {
  if (!(err instanceof ServiceError) || err.code !== 'INVALID_PARAMETER') return err;
  const field = err.details?.field;
  if (typeof field !== 'string' || err.details?.location !== undefined) return err;
  const top = field.split('.')[0]!;
  const carries = (o: unknown) => typeof o === 'object' && o !== null && Object.hasOwn(o, top);
  const location = carries(parts.params) ? 'params' : carries(parts.query) ? 'querystring' : carries(parts.body) ? 'body' : undefined;
  if (location === undefined) return err;
  return reworded(err, LOCATION_NOUN[location]!, { location });
}

/**
 * Registers one REST route around an operation: the policy goes into the route config (the
 * guard enforces it), the OpenAPI entry is built from the operation (operationId, tag,
 * summary, description, security, the success and every error status), and the handler maps
 * the request to the operation's input and sends its answer in the envelope.
 */
export function operationRoute(app: FastifyInstance, services: Services, asOf: AsOf, op: Operation, spec: RouteSpec): void {
  const status = op.status ?? 200;
  const response: Record<number, z.ZodType> = { [status]: successEnvelope(op) };
  for (const code of errorCodesOf(op)) response[ERROR_STATUS[code]] = ErrorEnvelopeSchema;
  const respond = (req: FastifyRequest, reply: FastifyReply, out: Served<unknown>): FastifyReply => {
    if (applyCaching(req, reply, op, out, asOf, services.market.mode === 'live')) return reply;
    return sendOk(req, reply, out.json, out.cached, asOf, status);
  };
  // Undeclared query parameters are refused, not ignored (closedObject).
  const querystring = closedObject(spec.querystring, 'query parameter');
  const toInput = spec.input ?? ((r: RouteParts) => ({ ...r.params, ...r.query, ...(r.body as object | undefined) }));
  app.withTypeProvider<ZodTypeProvider>().route({
    method: spec.method,
    url: spec.url,
    config: { policy: op.policy },
    schema: {
      ...(spec.hide ? { hide: true } : {}),
      operationId: op.name,
      tags: [op.tag],
      summary: op.summary,
      description: op.description,
      security: securityOf(op.policy),
      ...(spec.params ? { params: spec.params } : {}),
      querystring,
      ...(spec.body ? { body: spec.body } : {}),
      response,
    },
    // Synchronous when the operation answers synchronously (the memoized market answers): no
    // promise per request; an operation that returns a promise is awaited (Fastify's thenable).
    handler: (req: FastifyRequest, reply: FastifyReply) => {
      const parts: RouteParts = {
        params: (req.params ?? {}) as Record<string, unknown>,
        query: (req.query ?? {}) as Record<string, unknown>,
        body: req.body,
      };
      let out: Served<unknown> | Promise<Served<unknown>>;
      try {
        out = op.run(services, req.caller, toInput(parts) as never);
      } catch (err) {
        throw withLocation(err, parts);
      }
      if (out instanceof Promise)
        return out.then(
          (o) => respond(req, reply, o),
          (err: unknown) => {
            throw withLocation(err, parts);
          },
        );
      respond(req, reply, out);
      return undefined;
    },
  });
}
