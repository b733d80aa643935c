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

/**
 * The site's pages in navigation order: the dashboard's header (src/web/page.ts) and the HTML
 * 404 page (src/http/app.ts) link the same ones. `nav`: the dashboard's name for the page,
 * which marks the current one (`data-nav`); the API reference has none (it is not a dashboard page).
 */
export const SITE_PAGES: readonly { href: string; label: string; nav?: string }[] = [
  { href: '/', label: 'Overview', nav: 'overview' },
  { href: '/chains', label: 'Chains', nav: 'chains' },
  { href: '/track-record', label: 'Track record', nav: 'track-record' },
  { href: '/account', label: 'Account', nav: 'account' },
  { href: '/docs', label: 'API reference' },
];
