import type { Tier } from '../auth/tiers.ts';
import { SITE_PAGES } from '../http/page-headers.ts';

/** What the page script needs from the server, embedded in the document as JSON (`#config`). */
export interface PageConfig {
  /** `embedded`: sign in / sign up on this page; otherwise the external identity provider's issuer URL. */
  signIn: 'embedded' | string;
  /** The MCP endpoint for the client configuration snippet. */
  mcpUrl: string;
  /** Active keys a user may hold (MAX_ACTIVE_KEYS). */
  maxKeys: number;
  /** Requests per minute and per UTC day of each tier (src/auth/tiers.ts; `day: null` = no daily limit). */
  tiers: Record<Tier, { day: number | null; minute: number }>;
  /** The dashboard's own per-address budget (per minute). */
  dashboardPerMinute: number;
  /** The longest display name sign-up takes, in characters (SIGN_UP_NAME_MAX, src/http/identity.ts). */
  nameMax: number;
  /** The password policy in words (src/auth/password-policy.ts). */
  passwordRules: string;
  /** The five signal levels, strongest buy first (engine SIGNAL_LEVELS). */
  signalLevels: readonly string[];
  /** The BTC regime levels, bull first (engine REGIME_ORDER reversed). */
  regimeLevels: readonly string[];
  /** The metrics a thesis condition may test (engine THESIS_METRICS). */
  thesisMetrics: readonly string[];
  /**
   * Where the figures come from: `offline` (the bundled historical dataset, whose last day is
   * `dataAsOf`; the page says how many days before today that is) or `live` (`dataAsOf` null:
   * each answer carries its own day and staleness).
   */
  dataMode: 'offline' | 'live';
  dataAsOf: string | null;
  /** The server's UTC day (YYYY-MM-DD) when it sent the page: "today" of the offline note, whatever the browser's clock says. */
  today: string;
}

/** JSON safe inside a `<script type="application/json">` element. */
function scriptJson(v: unknown): string {
  return JSON.stringify(v).replace(/</g, '\\u003c');
}

/**
 * The dashboard document, the same for every page path: a header with the navigation, an
 * empty `<main>` that `/app/static/app.js` (an ES module, no build step) fills according to
 * the path, and the configuration as a JSON data block. No inline script or style, so the CSP
 * can be `'self'` only. Should app.js not run (a 404, a script error), app.css reveals a
 * fallback under "Loading..." after a few seconds with links to the same figures in the API;
 * app.js removes it as soon as it runs.
 */
export function dashboardHtml(config: PageConfig): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Market Intelligence</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/app/static/app.css">
<script type="module" src="/app/static/app.js"></script>
<script type="application/json" id="config">${scriptJson(config)}</script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/">Market Intelligence</a>
<nav aria-label="Main">
<ul>
${SITE_PAGES.map((p) => `<li><a href="${p.href}"${p.nav ? ` data-nav="${p.nav}"` : ''}>${p.label}</a></li>`).join('\n')}
</ul>
</nav>
</header>
<main id="main" tabindex="-1"><p class="muted">Loading...</p>
<p class="load-fallback" id="load-fallback">Still nothing? The page's script may have failed to load: reload to try again. The same figures are in the API: <a href="/api/v1/signals">/api/v1/signals</a>, <a href="/api/v1/regime">/api/v1/regime</a>, <a href="/api/v1/status">/api/v1/status</a>.</p>
<noscript><p>This dashboard needs JavaScript. The same figures are in the API: <a href="/api/v1/signals">/api/v1/signals</a>, <a href="/api/v1/regime">/api/v1/regime</a> (<a href="/api/v1/openapi.json">OpenAPI</a>).</p></noscript></main>
<footer class="foot">
<p>Signals are computed point-in-time from ${config.dataMode === 'offline' ? `the bundled historical dataset (offline mode, data to ${config.dataAsOf})` : 'market data ingested from public APIs'}; not investment advice. <a href="/api/v1/openapi.json">OpenAPI</a> · <a href="/api/v1/status">Data status</a></p>
</footer>
</body>
</html>
`;
}

/**
 * The dashboard's Content-Security-Policy: scripts, styles, images and fetches from this
 * origin only (lightweight-charts sets element styles through the CSSOM, which a style-src
 * without 'unsafe-inline' allows); no frames, no plugins, no external fonts.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');
