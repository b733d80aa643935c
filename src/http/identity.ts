import type { FastifyInstance } from 'fastify';
import { fromNodeHeaders } from 'better-auth/node';
import { AUTH_BASE_PATH, CLIENT_IP_HEADER, type EmbeddedIdentity } from '../auth/identity.ts';
import { SIGNIN_CSP, SIGNIN_HTML } from './signin-page.ts';

/** Largest request body accepted on /auth/* (sign-up, sign-in): 64 KiB. */
const AUTH_BODY_LIMIT = 64 * 1024;

/** Request headers not forwarded to better-auth (hop-by-hop, or recomputed from the body; the client-IP header is set here). */
const DROPPED_REQUEST_HEADERS = ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', CLIENT_IP_HEADER];

/** Response headers not copied back (Fastify computes them). */
const DROPPED_RESPONSE_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'set-cookie']);

/**
 * Mounts the embedded identity provider (src/auth/identity.ts) on the app: `/auth/*` (GET and
 * POST, handed to better-auth as a web Request built on the configured origin, with the
 * client address in CLIENT_IP_HEADER), `/.well-known/openid-configuration`, and `/signin`.
 */
export async function identityRoutes(app: FastifyInstance, idp: EmbeddedIdentity): Promise<void> {
  await app.register(async (scope) => {
    // better-auth parses the body itself: hand it the raw bytes, whatever the content type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: AUTH_BODY_LIMIT }, (_req, body, done) => done(null, body));

    scope.route({
      method: ['GET', 'POST'],
      url: `${AUTH_BASE_PATH}/*`,
      schema: { hide: true },
      handler: async (req, reply) => {
        const headers = fromNodeHeaders(req.headers);
        for (const h of DROPPED_REQUEST_HEADERS) headers.delete(h);
        headers.set(CLIENT_IP_HEADER, req.ip);
        const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : (req.body as Buffer | undefined);
        // The URL is built on the configured origin, never on the client's Host header.
        const request = new Request(`${idp.origin}${req.url}`, {
          method: req.method,
          headers,
          body: body && body.length > 0 ? new Uint8Array(body) : undefined,
        });
        const res = await idp.handler(request);
        reply.status(res.status);
        res.headers.forEach((value, key) => {
          if (!DROPPED_RESPONSE_HEADERS.has(key)) reply.header(key, value);
        });
        const cookies = res.headers.getSetCookie();
        if (cookies.length > 0) reply.header('set-cookie', cookies);
        reply.header('cache-control', 'no-store');
        return reply.send(res.body ? Buffer.from(await res.arrayBuffer()) : null);
      },
    });

    scope.get('/.well-known/openid-configuration', { schema: { hide: true } }, async (_req, reply) =>
      reply.header('cache-control', 'public, max-age=300').type('application/json; charset=utf-8').send(idp.discovery),
    );

    scope.get('/signin', { schema: { hide: true } }, async (_req, reply) =>
      reply
        .header('content-security-policy', SIGNIN_CSP)
        .header('cache-control', 'no-store')
        .header('x-frame-options', 'DENY')
        .header('referrer-policy', 'no-referrer')
        .header('x-content-type-options', 'nosniff')
        .type('text/html; charset=utf-8')
        .send(SIGNIN_HTML),
    );
  });
}
