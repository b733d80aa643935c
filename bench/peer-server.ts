// The peer baseline of `npm run bench`: what a Fastify developer would build for the same
// features from the standard plugins, serving the same bytes as the service:
//  - API keys checked by `@fastify/bearer-auth` against an in-memory Map of SHA-256 digests
//    (the keys file, one key per line; unknown key -> 401);
//  - `@fastify/rate-limit` keyed per API key with the api tier's per-minute limit, in memory,
//    or with its Redis store when REDIS_URL is set (one Lua script per request);
//  - one pino access-log line per request (method, path, status, ms, tier, ip; to stdout,
//    which the bench sends to /dev/null like the service's), a request id per request;
//  - the service's response headers: X-Request-Id, X-RateLimit-* (from the plugin), the IETF
//    RateLimit/RateLimit-Policy headers, X-Service-Tier, ETag, Cache-Control, Vary, CORS,
//    content-type (the static ones captured from the service, in the headers file).
// Usage: peer-server.ts <body file> <headers JSON file> <keys file> (PORT, HOST, REDIS_URL env).
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import bearerAuth from '@fastify/bearer-auth';
import rateLimit from '@fastify/rate-limit';
import Fastify, { LogController } from 'fastify';
import { Redis } from 'ioredis';
import { TIER_LIMITS } from '../src/auth/tiers.ts';

const [bodyFile, headersFile, keysFile] = process.argv.slice(2);
const body = readFileSync(bodyFile!, 'utf8');
const staticHeaders = JSON.parse(readFileSync(headersFile!, 'utf8')) as Record<string, string>;
const digest = (key: string) => createHash('sha256').update(key).digest('hex');
/** SHA-256 digest of each key -> its id (what a key table would hold). */
const keys = new Map<string, string>();
for (const [i, k] of readFileSync(keysFile!, 'utf8').split('\n').filter(Boolean).entries()) keys.set(digest(k), `key${i}`);

declare module 'fastify' {
  interface FastifyRequest {
    keyId?: string;
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
});
await app.register(bearerAuth, {
  keys: new Set<string>(),
  auth: (key: string, req) => {
    const id = keys.get(digest(key));
    if (id) req.keyId = id;
    return id !== undefined;
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
