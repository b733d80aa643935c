import type { FastifyReply } from 'fastify';

/**
 * The headers of every HTML page the service serves (the dashboard, the 404 page, Swagger UI
 * at /docs, better-auth's /auth/error): `csp` as its Content-Security-Policy, no framing by
 * other sites (`X-Frame-Options: DENY`, with `frame-ancestors 'none'` in each CSP), no MIME
 * sniffing, and no referrer sent from it. One place, so the pages cannot drift apart.
 * @returns `reply`, for chaining.
 */
export function pageHeaders(reply: FastifyReply, csp: string): FastifyReply {
  return reply
    .header('content-security-policy', csp)
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer');
}
