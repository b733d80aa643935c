import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { nextUtcMidnight } from '../rate-limit/limiter.ts';
import type { Operation } from '../services/operation.ts';
import { resolveAsOf, type AsOf } from './envelope.ts';

/** Operation tags whose answers are market data (cacheable); everything else is per-user state. */
const MARKET_TAGS = new Set(['signals', 'regime', 'chains', 'assets']);

/** Whether an operation's GET answers carry an ETag and may be revalidated (304): market data. */
export function cacheable(op: Operation): boolean {
  return MARKET_TAGS.has(op.tag);
}

/**
 * The `Cache-Control` of an operation's success response at `now`:
 * - market data (tags signals, regime, chains, assets): `public` for public operations asked
 *   without credentials, `private` when the request carried `Authorization` (a shared cache
 *   must not answer keyed requests: they are metered and their rate-limit headers differ,
 *   RFC 9111 section 3.5) and for key-only operations (the signal history), with `max-age` = the seconds until the
 *   next 00:00 UTC, when a live deployment computes the next day (at least 60 s). The bundled
 *   dataset never changes while the process runs; a restart with new data or a new AS_OF
 *   happens at a day boundary at the earliest in a daily-ingest deployment, and the ETag
 *   changes with the data, so a revalidation after max-age is cheap (304).
 * - keys and theses: `no-store` (secrets and per-user state are never cached).
 * Every cacheable answer also gets `Vary: Authorization, accept-encoding` (applyCaching).
 * In live mode (`live`) new data may arrive at any ingest round, so `max-age` is LIVE_MAX_AGE_S.
 */
export function cacheControlOf(op: Operation, authorized: boolean, now: Date | number = Date.now(), live = false): string {
  if (!cacheable(op)) return 'no-store';
  const scope = op.policy.name === 'public' && !authorized ? 'public' : 'private';
  if (live) return `${scope}, max-age=${LIVE_MAX_AGE_S}`;
  return `${scope}, max-age=${secondsToMidnight(typeof now === 'number' ? now : now.getTime())}`;
}

/** The last `secondsToMidnight` answer: the same for every request of one second. */
let toMidnight = { second: -1, value: 0 };

/** Whole seconds from `nowMs` to the next 00:00 UTC, at least 60 (memoized per second). */
function secondsToMidnight(nowMs: number): number {
  const second = Math.floor(nowMs / 1000);
  if (toMidnight.second !== second) {
    const value = Math.max(60, Math.floor((nextUtcMidnight(new Date(nowMs)).getTime() - nowMs) / 1000));
    toMidnight = { second, value };
  }
  return toMidnight.value;
}

/** `max-age` of market data in live mode, s: the shortest ingest schedule is every 15 minutes (docs/live-data.md). */
export const LIVE_MAX_AGE_S = 300;

const etags = new WeakMap<object, string>();

/**
 * A weak entity tag (RFC 9110 section 8.8.3) of an answer's data: the SHA-1 of the data JSON and
 * the as-of day, base64url, memoized per answer object. Weak because the envelope around the
 * data (`meta.timestamp`, `meta.request_id`) and the content coding differ between responses
 * that carry the same data.
 */
export function etagOf(served: { json: string }, asOf: AsOf): string {
  let tag = etags.get(served);
  if (!tag) {
    tag = `W/"${createHash('sha1')
      .update(resolveAsOf(asOf) ?? '')
      .update('\n')
      .update(served.json)
      .digest('base64url')}"`;
    etags.set(served, tag);
  }
  return tag;
}

/** Whether `If-None-Match` (a list of entity tags, or `*`) matches `etag` by weak comparison. */
export function ifNoneMatch(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === opaque);
}

/**
 * The request headers a cacheable answer varies on (RFC 9110 section 12.5.5): `Authorization`
 * (public without credentials, private with them; tiers differ only in headers) and
 * `accept-encoding` (answers over 1 KB are compressed by it). Set on every cacheable answer,
 * not only on the compressed ones: an identity 200 (a request without Accept-Encoding, or an
 * answer under 1 KB) is also chosen by it, and a 304 must carry the Vary the 200 would have
 * (RFC 9110 section 15.4.5), but @fastify/compress adds it only when it compresses, which a
 * 304 without body never is. Lower case, as @fastify/compress looks for it (no duplicate).
 */
const VARY = 'Authorization, accept-encoding';

/**
 * Sets the caching headers of a successful operation response and answers 304 Not Modified
 * (no body, the rate-limit headers kept) when the request's `If-None-Match` matches the
 * data's ETag. Only GET/HEAD market-data answers get an ETag and `Vary` (VARY); the others
 * get `no-store`.
 * @returns true when a 304 was sent.
 */
export function applyCaching(
  req: FastifyRequest,
  reply: FastifyReply,
  op: Operation,
  served: { json: string },
  asOf: AsOf,
  live = false,
): boolean {
  const cacheControl = cacheControlOf(op, Boolean(req.headers.authorization), Date.now(), live);
  reply.header('Cache-Control', cacheControl);
  if (cacheControl === 'no-store' || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
  const etag = etagOf(served, asOf);
  const vary = reply.getHeader('vary');
  reply.header('ETag', etag).header('Vary', vary ? `${String(vary)}, ${VARY}` : VARY);
  if (!ifNoneMatch(req.headers['if-none-match'], etag)) return false;
  reply.code(304).send();
  return true;
}

/**
 * The handler of `GET /api/v1/openapi.json`: `document` (the swagger plugin's object) is
 * serialized once, at the first request, and answered 200 with a weak ETag (its SHA-1,
 * base64url), or 304 on a matching `If-None-Match`, so that client generators and /docs
 * revalidate the ~125 KB document instead of fetching it again. `Cache-Control: max-age=0`
 * (revalidated each time: it changes only with the build, but a restart with a new build must
 * be seen at once), `public` without credentials and `private` with them, and `Vary` as market
 * data (VARY): the rate-limit headers are the caller's.
 */
export function openApiDocumentHandler(document: () => unknown): (req: FastifyRequest, reply: FastifyReply) => FastifyReply {
  let served: { json: string; etag: string } | null = null;
  return (req, reply) => {
    if (!served) {
      const json = JSON.stringify(document());
      served = { json, etag: `W/"${createHash('sha1').update(json).digest('base64url')}"` };
    }
    const vary = reply.getHeader('vary');
    reply
      .header('Cache-Control', `${req.headers.authorization ? 'private' : 'public'}, max-age=0`)
      .header('ETag', served.etag)
      .header('Vary', vary ? `${String(vary)}, ${VARY}` : VARY);
    if (ifNoneMatch(req.headers['if-none-match'], served.etag)) return reply.code(304).send();
    return reply.type('application/json; charset=utf-8').send(served.json);
  };
}
