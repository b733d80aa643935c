import type { FastifyReply, FastifyRequest } from 'fastify';
import { loggableError, OutageLog, ServiceError } from '../errors.ts';
import { rateLimitAddress } from '../rate-limit/address.ts';
import { rateLimitHeaders, type LimitDecision } from '../rate-limit/limiter.ts';
import {
  type Access,
  anonymousCaller,
  type Authentication,
  bearerChallenge,
  type Caller,
  type Metering,
  PUBLIC,
  type Policy,
  misplacedCredential,
  unknownRouteCredential,
} from '../services/access.ts';
import { sendServiceError, type AsOf } from './envelope.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller the guard identified (set on every /api/v1 request it admits). */
    caller: Caller;
  }
  interface FastifyContextConfig {
    /** The route's access policy: its operation's (services/operations); default PUBLIC. */
    policy?: Policy;
  }
}

/**
 * The /api/v1 guard (an onRequest hook): a thin caller of the shared access rules
 * (services/access.ts) with the route's policy — authenticate, authorize, meter — that renders
 * refusals as the error envelope and sets the rate-limit headers on every response, whatever
 * its outcome: `WWW-Authenticate` on 401 (RFC 6750), `Retry-After` on 429. `onDecision` is
 * told each quota decision (metrics). The dashboard's data routes (src/web/) use the same
 * guard with `mapPolicy` = `dashboardPolicy`.
 */
export function createGuard(
  access: Access,
  asOf: AsOf,
  onDecision?: (d: LimitDecision) => void,
  /** Maps the route's policy to the one enforced (the dashboard's reading: services/access.ts `dashboardPolicy`). */
  mapPolicy: (p: Policy) => Policy = (p) => p,
  /** Where a 503's cause is logged: once per 10 s during an outage, not per request (errors.ts). */
  outageLog: OutageLog = new OutageLog(),
) {
  function refuse(req: FastifyRequest, reply: FastifyReply, err: ServiceError, limits: LimitDecision): FastifyReply {
    // Retry-After comes from sendError (envelope.ts), the one owner of it on REST.
    reply.headers(rateLimitHeaders(limits));
    if (err.code === 'UNAUTHORIZED') reply.header('WWW-Authenticate', bearerChallenge(err));
    return sendServiceError(req, reply, err, asOf);
  }

  /** After `meter`: reports the decision, refuses, or sets the rate-limit headers and lets the request on. */
  function metered(req: FastifyRequest, reply: FastifyReply, policy: Policy, m: Metering, done: (err?: Error) => void): void {
    if (policy.quota !== 'none') onDecision?.(m.limits);
    if (m.error) {
      refuse(req, reply, m.error, m.limits);
      return;
    }
    reply.headers(rateLimitHeaders(m.limits));
    done();
  }

  /** After `authenticate`: refuses, or authorizes and meters. */
  function authenticated(
    req: FastifyRequest,
    reply: FastifyReply,
    policy: Policy,
    auth: Authentication,
    done: (err?: Error) => void,
    /** The client address as the per-address limits count it (rateLimitAddress), worked out once by the guard. */
    address: string,
  ): void {
    if (!auth.ok) {
      if (auth.error.status >= 500) outageLog.error(req.log, loggableError(auth.cause ?? auth.error), 'dependency unavailable');
      refuse(req, reply, auth.error, auth.limits);
      return;
    }
    req.caller = auth.caller;
    const denied = access.authorize(auth.caller, policy);
    if (denied) {
      access
        .peek(auth.caller)
        .then((limits) => void refuse(req, reply, denied, limits))
        .catch(done);
      return;
    }
    const m = access.meter(auth.caller, policy, address);
    if (m instanceof Promise) m.then((x) => metered(req, reply, policy, x, done)).catch(done);
    // Metered synchronously (the memory limiter): the request goes on in the event loop's
    // check phase, after every socket read in this poll phase has been taken in, so the
    // requests that arrive together are answered together. Measured with `npm run bench`
    // (docs/benchmarks.md): continuing at once, each response was written between two reads
    // and woke the waiting client on its own: about 1.7x the CPU per request (user and
    // system time) of continuing here; the Redis limiter batches the same way on its replies.
    else setImmediate(metered, req, reply, policy, m, done);
  }

  // A callback-style hook: a key from the key cache counted by the memory limiter goes through
  // without a promise (see `authenticated`); the other paths (Redis, a database look-up)
  // continue when theirs settles.
  // A refusal sends the envelope and ends the request here (done is not called).
  return function guard(req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void {
    const address = rateLimitAddress(req.ip);
    const err = misplacedCredential(req.query, req.headers);
    if (err !== null) {
      // Refused before anything is counted, with the client address's limits in the headers.
      access
        .peek(anonymousCaller(`ip:${address}`))
        .then((limits) => void refuse(req, reply, err, limits))
        .catch(done);
      return;
    }
    const policy = mapPolicy(req.routeOptions.config?.policy ?? PUBLIC);
    const header = req.is404 ? unknownRouteCredential(req.headers.authorization) : req.headers.authorization;
    const auth = access.authenticate(header, policy, address);
    if (auth instanceof Promise) auth.then((a) => authenticated(req, reply, policy, a, done, address)).catch(done);
    else authenticated(req, reply, policy, auth, done, address);
  };
}
