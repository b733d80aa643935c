import type { FastifyReply, FastifyRequest } from 'fastify';
import { looksLikeApiKey } from '../auth/api-keys.ts';
import { IdentityProviderUnavailableError } from '../auth/jwt.ts';
import type { Tier } from '../auth/tiers.ts';
import { rateLimitHeaders, type LimitDecision, type TierRateLimiter } from '../rate-limit/limiter.ts';
import type { KeyCaller, KeyService, UserIdentity } from '../services/keys.ts';
import type { UsageTracker } from '../services/usage.ts';
import { sendError } from './envelope.ts';
import { ServiceError } from './errors.ts';

/**
 * Which credential a route takes: `api` an optional API key (public data routes), `key`
 * a required API key, `jwt` a required JWT of a signed-in user (key management), `user` an
 * API key or a JWT (theses), `none` nothing (docs), `mcp` an optional API key whose quota is
 * counted per tools/call by the MCP endpoint itself.
 */
export type AuthMode = 'api' | 'key' | 'jwt' | 'user' | 'none' | 'mcp';

/** Who is calling. */
export type Caller =
  | { kind: 'anonymous'; tier: 'unauthenticated'; subject: string }
  | { kind: 'key'; tier: Tier; subject: string; keyId: string; userId: string }
  | { kind: 'jwt'; tier: Tier; subject: string; userId: string; email: string | null };

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
  interface FastifyContextConfig {
    auth?: AuthMode;
    /** Tiers allowed on the route (default all). */
    tiers?: readonly Tier[];
  }
}

/** The caller a valid API key stands for (REST guard and the stdio MCP server alike). */
export function keyCaller(k: KeyCaller): Caller {
  return { kind: 'key', tier: k.tier, subject: `key:${k.keyId}`, keyId: k.keyId, userId: k.userId };
}

/**
 * The signed-in user behind a request the guard admitted with an API key or a JWT (routes
 * with auth `jwt` or `user`).
 * @throws Error when the route let an anonymous caller through (a routing bug).
 */
export function signedInUser(req: FastifyRequest): UserIdentity {
  const c = req.caller;
  if (c.kind === 'jwt') return { userId: c.userId, email: c.email };
  if (c.kind === 'key') return { userId: c.userId, email: null };
  throw new Error('guard let an anonymous caller through to a user route');
}

/** Verifies a JWT; throws on any failure. */
export interface JwtCheck {
  verify(token: string): Promise<{ sub: string; email: string | null }>;
}

/** What the guard needs. */
export interface GuardDeps {
  keys: KeyService;
  jwt: JwtCheck | null;
  limiter: TierRateLimiter;
  usage: UsageTracker;
  /** The user's plan (for JWT callers). */
  userTier(userId: string): Promise<Tier | null>;
  asOf: string | null;
}

/** Failed authentications allowed per client IP per minute before 429. */
export const AUTH_FAILURES_PER_MINUTE = 20;
/** Key-management / JWT requests allowed per user per minute. */
export const USER_REQUESTS_PER_MINUTE = 30;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The /api/v1 guard (an onRequest hook): authenticates the caller, checks the route's
 * tiers, counts the request against the caller's quota, and sets the rate-limit headers
 * on the response whatever its outcome. Refused requests (401, 403, 429) consume no quota;
 * failed authentications count against a per-IP budget; JWT callers against a per-user one.
 */
export function createGuard(deps: GuardDeps) {
  const authFailures = deps.limiter.budget('auth-fail', AUTH_FAILURES_PER_MINUTE, 60);
  const perUser = deps.limiter.budget('user', USER_REQUESTS_PER_MINUTE, 60);

  /** 429 RATE_LIMITED with Retry-After and `details: {window, limit, reset}`. */
  function rateLimited(req: FastifyRequest, reply: FastifyReply, message: string, window: 'minute' | 'day', limit: number, reset: Date, retryAfterSec: number): FastifyReply {
    reply.header('Retry-After', String(retryAfterSec));
    return sendError(req, reply, 429, 'RATE_LIMITED', message, { window, limit, reset: reset.toISOString() }, deps.asOf);
  }

  function tooManyFailures(req: FastifyRequest, reply: FastifyReply, retryAfterSec: number): FastifyReply {
    return rateLimited(req, reply, 'Too many failed authentication attempts from this address', 'minute', AUTH_FAILURES_PER_MINUTE, new Date(Date.now() + retryAfterSec * 1000), retryAfterSec);
  }

  async function refuse(req: FastifyRequest, reply: FastifyReply, err: ServiceError): Promise<FastifyReply> {
    const ipSubject = `ip:${req.ip}`;
    reply.headers(rateLimitHeaders(await deps.limiter.peek(ipSubject, 'unauthenticated')));
    const budget = await authFailures.consume(req.ip);
    if (!budget.allowed) return tooManyFailures(req, reply, budget.retryAfterSec);
    // RFC 6750 section 3.1: no error code when the request carried no credentials.
    reply.header(
      'WWW-Authenticate',
      err.details?.reason === 'missing' ? 'Bearer realm="api"' : `Bearer realm="api", error="invalid_token", error_description="${err.message.replace(/"/g, "'")}"`,
    );
    return sendError(req, reply, 401, 'UNAUTHORIZED', err.message, err.details?.reason ? { reason: err.details.reason } : undefined, deps.asOf);
  }

  async function identify(req: FastifyRequest, mode: AuthMode): Promise<Caller> {
    const header = req.headers.authorization;
    if (header === undefined || header === '') {
      if (mode === 'key' || mode === 'user') throw new ServiceError('UNAUTHORIZED', 'This endpoint needs an API key: Authorization: Bearer svc_live_...', { reason: 'missing' });
      if (mode === 'jwt') throw new ServiceError('UNAUTHORIZED', 'Key management needs the JWT of a signed-in user: Authorization: Bearer <JWT>', { reason: 'missing' });
      return { kind: 'anonymous', tier: 'unauthenticated', subject: `ip:${req.ip}` };
    }
    const m = BEARER.exec(header);
    if (!m) throw new ServiceError('UNAUTHORIZED', 'Authorization header must be: Bearer <token>', { reason: 'malformed' });
    const token = m[1]!;
    if (looksLikeApiKey(token)) {
      if (mode === 'jwt') throw new ServiceError('UNAUTHORIZED', 'Key management takes the JWT of a signed-in user, not an API key', { reason: 'wrong_credential' });
      return keyCaller(await deps.keys.authenticate(token));
    }
    if (mode === 'api' || mode === 'key' || mode === 'none' || mode === 'mcp' || !deps.jwt) {
      throw new ServiceError('UNAUTHORIZED', 'Invalid API key', { reason: 'malformed' });
    }
    let claims: { sub: string; email: string | null };
    try {
      claims = await deps.jwt.verify(token);
    } catch (e) {
      // Not the caller's fault: 503, and no failed-authentication count against its address.
      if (e instanceof IdentityProviderUnavailableError) throw new ServiceError('SERVICE_UNAVAILABLE', 'The identity provider could not be reached; try again shortly');
      throw new ServiceError('UNAUTHORIZED', 'Invalid or expired token', { reason: 'invalid_jwt' });
    }
    const tier = (await deps.userTier(claims.sub)) ?? 'free';
    return { kind: 'jwt', tier, subject: `user:${claims.sub}`, userId: claims.sub, email: claims.email };
  }

  return async function guard(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | void> {
    const cfg = req.routeOptions.config ?? {};
    const mode: AuthMode = cfg.auth ?? 'api';
    // An address that used up its failed-authentication budget is refused before any key or
    // JWT is looked up, so guessing cannot make the service query its database.
    if (req.headers.authorization) {
      const blocked = await authFailures.exhausted(req.ip);
      if (blocked.exhausted) {
        reply.headers(rateLimitHeaders(await deps.limiter.peek(`ip:${req.ip}`, 'unauthenticated')));
        return tooManyFailures(req, reply, blocked.retryAfterSec);
      }
    }
    let caller: Caller;
    try {
      caller = await identify(req, mode);
    } catch (e) {
      if (e instanceof ServiceError && e.code === 'UNAUTHORIZED') return refuse(req, reply, e);
      // A dependency failed while identifying the caller (503/500 from the error handler):
      // the response still carries the rate-limit headers, of the client address.
      reply.headers(rateLimitHeaders(await deps.limiter.peek(`ip:${req.ip}`, 'unauthenticated')));
      throw e;
    }
    req.caller = caller;
    if (mode === 'mcp') return; // quota per tools/call, headers set by the MCP endpoint

    if (caller.kind === 'jwt' && mode === 'jwt') {
      // Key management: a per-user budget, apart from the API quota; its headers describe it.
      const b = await perUser.consume(caller.userId);
      const now = Date.now();
      reply.headers(
        rateLimitHeaders({
          allowed: b.allowed,
          tier: caller.tier,
          limit: USER_REQUESTS_PER_MINUTE,
          remaining: b.remaining,
          reset: new Date(now + b.resetSec * 1000),
          windows: [{ window: 'minute', limit: USER_REQUESTS_PER_MINUTE, remaining: b.remaining, resetSec: b.resetSec }],
          ...(b.allowed ? {} : { exceeded: { window: 'minute' as const, limit: USER_REQUESTS_PER_MINUTE, reset: new Date(now + b.retryAfterSec * 1000), retryAfterSec: b.retryAfterSec } }),
        }),
      );
      if (!b.allowed) {
        return rateLimited(req, reply, `Too many key-management requests for this user: at most ${USER_REQUESTS_PER_MINUTE} per minute`, 'minute', USER_REQUESTS_PER_MINUTE, new Date(now + b.retryAfterSec * 1000), b.retryAfterSec);
      }
      return;
    }

    if (mode === 'none') {
      reply.headers(rateLimitHeaders(await deps.limiter.peek(caller.subject, caller.tier)));
      return;
    }

    const allowed = cfg.tiers;
    if (allowed && !allowed.includes(caller.tier)) {
      reply.headers(rateLimitHeaders(await deps.limiter.peek(caller.subject, caller.tier)));
      return sendError(req, reply, 403, 'TIER_REQUIRED', `This endpoint needs the ${allowed.join(' or ')} tier; your tier is ${caller.tier}`, { required_tiers: allowed, tier: caller.tier }, deps.asOf);
    }

    // API routes: a JWT caller (theses) counts against the same tier quota as the user's keys
    // would, per user (subject `user:<sub>`).
    const d: LimitDecision = await deps.limiter.consume(caller.subject, caller.tier);
    reply.headers(rateLimitHeaders(d));
    if (!d.allowed) {
      // rateLimitHeaders already set Retry-After from the decision.
      const x = d.exceeded!;
      return rateLimited(req, reply, `Rate limit exceeded: ${x.limit} requests per ${x.window} for the ${caller.tier} tier`, x.window, x.limit, x.reset, x.retryAfterSec);
    }
    if (caller.kind === 'key') deps.usage.record(caller.keyId);
  };
}

