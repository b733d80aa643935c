// The peer baseline of `npm run bench`: what a Fastify developer would build for the same
// features from the standard plugins, serving the same bytes as the service:
//  - API keys checked by `@fastify/bearer-auth` against an in-memory Map of SHA-256 digests
//    (the keys file, one key per line; unknown key -> 401);
//  - `@fastify/rate-limit` keyed per API key with the api tier's per-minute limit, in memory,
//    or with its Redis store when REDIS_URL is set (one Lua script per request);
//  - one pino access-log line per request (method, path, status, ms, tier, ip; to stdout,
//    which the bench sends to /dev/null like the service's), a request id per request;
//  - the service's response headers: X-Request-Id, X-RateLimit-* (from the plugin), the IETF
//    RateLimit/RateLimit-Policy headers, X-Service-Tier, X-Content-Type-Options, ETag,
//    Cache-Control, Vary, CORS, content-type (the static ones captured from the service, in the headers file).
// With PEER_FEATURES=full (the default) it also has the service's other per-request features,
// each from its standard plugin, as the service answers a keyed GET /api/v1/signals:
//  - the account ceiling beside the key's per-minute window: each user's keys together get
//    the tier's limit times 5 (the keys per user; src/services/access.ts ACCOUNT_LIMITER), the
//    keys file's keys taken 5 to a user as the bench makes them, through the plugin's own
//    `createRateLimit` (same store; with Redis a second script per request; the api tier has
//    no daily window, so neither has the peer);
//  - `@fastify/cors` and `@fastify/compress` registered with the service's options (src/http/app.ts)
//    instead of static CORS headers;
//  - Prometheus metrics by `fastify-metrics` (prom-client): the request-duration histogram
//    by method, route and status (the service's buckets; the plugin's summary switched off,
//    so it stays empty), the process metrics, a rate-limit decisions counter (its children
//    bound once, one decision per keyed request from its outcome), GET /metrics;
//  - per-key usage counted in memory (the service also writes it to its database every 5 s;
//    the peer has no database, so that part is not matched).
// Not matched: the service also checks the client address's failed-auth budget and the key's
// revocation marker and tier epoch on the success path, and with Redis it admits a request in
// one batched script (key window, account ceiling, revocation, epoch) where the peer's plugin
// runs one script per limit, two per request.
// PEER_FEATURES=minimal is the peer of the first ten sessions (one window, static CORS headers,
// no compression plugin, no metrics, no usage counting).
// Usage: peer-server.ts <body file> <headers JSON file> <keys file> (PORT, HOST, REDIS_URL, PEER_FEATURES env).
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import bearerAuth from '@fastify/bearer-auth';
import fastifyCompress from '@fastify/compress';
import fastifyCors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, { LogController } from 'fastify';
import fastifyMetricsModule from 'fastify-metrics';
import { Redis } from 'ioredis';
import { Counter } from 'prom-client';
import { TIER_LIMITS } from '../src/auth/tiers.ts';

// A CommonJS module whose plugin is its `default` export.
const fastifyMetrics = fastifyMetricsModule.default;

const [bodyFile, headersFile, keysFile] = process.argv.slice(2);
const full = (process.env.PEER_FEATURES ?? 'full') === 'full';
const body = readFileSync(bodyFile!, 'utf8');
const captured = JSON.parse(readFileSync(headersFile!, 'utf8')) as Record<string, string>;
// With the CORS plugin, its headers come from the plugin, not from the captured set.
const staticHeaders = full ? Object.fromEntries(Object.entries(captured).filter(([h]) => !h.startsWith('access-control-'))) : captured;
const digest = (key: string) => createHash('sha256').update(key).digest('hex');
/** SHA-256 digest of each key -> its id and its user's (what a key table would hold; 5 keys per user). */
const keys = new Map<string, { id: string; user: string }>();
for (const [i, k] of readFileSync(keysFile!, 'utf8').split('\n').filter(Boolean).entries())
  keys.set(digest(k), { id: `key${i}`, user: `user${Math.floor(i / 5)}` });
/** Requests per key id, counted in memory (full features). */
const usage = new Map<string, number>();

declare module 'fastify' {
  interface FastifyRequest {
    keyId?: string;
    userId?: string;
  }
}

const app = Fastify({
  logger: { level: 'info' },
  genReqId: () => randomUUID(),
  // One access-log line per request (onResponse below), as the service writes.
  logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
});
app.addHook('onRequest', async (req, reply) => {
  reply.header('X-Request-Id', req.id);
});
app.addHook('onResponse', async (req, reply) => {
  req.log.info(
    {
      method: req.method,
      path: req.url.split('?')[0],
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
      tier: req.keyId ? 'api' : undefined,
      ip: req.ip,
    },
    'request completed',
  );
  // One decision per keyed request, from its outcome (a refusal by either limit is a 429),
  // and the usage of the requests served, as the service counts them.
  if (full && req.keyId) {
    if (reply.statusCode === 429) decided!.limited.inc();
    else {
      decided!.allowed.inc();
      usage.set(req.keyId, (usage.get(req.keyId) ?? 0) + 1);
    }
  }
});
/** The decisions counter's two children, bound once (as the service binds its own). */
let decided: { allowed: { inc(): void }; limited: { inc(): void } } | undefined;
if (full) {
  await app.register(fastifyMetrics, {
    endpoint: '/metrics',
    routeMetrics: {
      enabled: { histogram: true, summary: false },
      overrides: {
        histogram: { name: 'http_request_duration_seconds', buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] },
      },
    },
  });
  const decisions = new Counter({
    name: 'rate_limit_decisions_total',
    help: 'Rate-limit decisions, by tier and decision (allowed, limited)',
    labelNames: ['tier', 'decision'],
  });
  decided = {
    allowed: decisions.labels({ tier: 'api', decision: 'allowed' }),
    limited: decisions.labels({ tier: 'api', decision: 'limited' }),
  };
  // The service's options (src/http/app.ts, CORS_ORIGINS unset: any origin).
  await app.register(fastifyCors, {
    origin: '*',
    methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'If-None-Match'],
    exposedHeaders: captured['access-control-expose-headers'],
    credentials: false,
    maxAge: 600,
  });
  await app.register(fastifyCompress, { encodings: ['br', 'gzip', 'deflate'], threshold: 1024 });
}
await app.register(bearerAuth, {
  keys: new Set<string>(),
  auth: (key: string, req) => {
    const k = keys.get(digest(key));
    if (k) {
      req.keyId = k.id;
      req.userId = k.user;
    }
    return k !== undefined;
  },
  addHook: true,
});
const minute = TIER_LIMITS.api.minute;
await app.register(rateLimit, {
  global: true,
  max: minute,
  timeWindow: 60_000,
  keyGenerator: (req) => req.keyId ?? req.ip,
  ...(process.env.REDIS_URL
    ? { redis: new Redis(process.env.REDIS_URL, { connectTimeout: 500, maxRetriesPerRequest: 1 }), nameSpace: `bench-peer-${process.pid}-` }
    : {}),
});
if (full) {
  // The account ceiling, from the plugin (its documented way to apply another limit in a
  // hook), after the key's own window (preHandler follows every onRequest hook): a request the
  // key's window refuses does not count on the account, as in the service.
  const checkAccount = app.createRateLimit({ max: minute * 5, timeWindow: 60_000, keyGenerator: (req) => `acct:${req.userId ?? req.ip}` });
  app.addHook('preHandler', async (req, reply) => {
    const a = await checkAccount(req);
    if ('isExceeded' in a && a.isExceeded)
      return reply.code(429).header('Retry-After', a.ttlInSeconds).send({ error: 'account rate limit exceeded' });
  });
}
// The IETF draft headers the service also sends, from the plugin's figures.
app.addHook('onSend', async (_req, reply, payload) => {
  const remaining = reply.getHeader('x-ratelimit-remaining');
  const reset = reply.getHeader('x-ratelimit-reset');
  if (remaining !== undefined) {
    reply.header('RateLimit-Policy', `"minute";q=${minute};w=60`);
    reply.header('RateLimit', `"minute";r=${String(remaining)};t=${String(reset)}`);
  }
  return payload;
});
app.get('/api/v1/signals', (_req, reply) => {
  reply.headers(staticHeaders).send(body);
});
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' });
// A normal exit on SIGTERM (how the bench stops it), so that BENCH_NODE_ARGS=--cpu-prof writes its profile.
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
