import type { FastifyReply, FastifyRequest } from 'fastify';
import { loggableError, type ServiceError } from '../errors.ts';
import { rateLimitHeaders, type LimitDecision } from '../rate-limit/limiter.ts';
import { type Access, bearerChallenge, type Caller, refusalHeaders, PUBLIC, type Policy } from '../services/access.ts';
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
) {
  function refuse(req: FastifyRequest, reply: FastifyReply, err: ServiceError, limits: LimitDecision): FastifyReply {
    reply.headers(refusalHeaders(err, limits));
    if (err.code === 'UNAUTHORIZED') reply.header('WWW-Authenticate', bearerChallenge(err));
    return sendServiceError(req, reply, err, asOf);
  }

  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const policy = mapPolicy(req.routeOptions.config?.policy ?? PUBLIC);
    const auth = await access.authenticate(req.headers.authorization, policy, req.ip);
    if (!auth.ok) {
      if (auth.error.status >= 500) req.log.error({ err: loggableError(auth.cause ?? auth.error) }, 'dependency unavailable');
      return refuse(req, reply, auth.error, auth.limits);
    }
    req.caller = auth.caller;
    const denied = access.authorize(auth.caller, policy);
    if (denied) return refuse(req, reply, denied, await access.peek(auth.caller));
    const metered = await access.meter(auth.caller, policy, req.ip);
    if (policy.quota !== 'none') onDecision?.(metered.limits);
    if (metered.error) return refuse(req, reply, metered.error, metered.limits);
    reply.headers(rateLimitHeaders(metered.limits));
    return undefined;
  };
}
