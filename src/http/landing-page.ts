import { createHash } from 'node:crypto';

/**
 * The landing page at `GET /`: what the service is and where to go next (sign in, the API
 * reference, the OpenAPI document, the status, the metrics). Static HTML with an inline style
 * pinned by a CSP hash; no script, no CDN.
 */

const LANDING_STYLE = `
body{font:16px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:44rem;margin:3rem auto;padding:0 1rem}
h1{font-size:1.4rem;margin:0 0 .25rem}
p.lead{margin:0 0 1.5rem;color:#556}
ul{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:1rem 1.5rem 1rem 2.5rem}
li{margin:.4rem 0}
a{color:#2f5bd3}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f1f3f6;padding:.1rem .3rem;border-radius:4px}
`;

/** The page's links; `signIn` is false with an external identity provider (AUTH_ISSUER). */
export function landingHtml(opts: { signIn: boolean; metrics: boolean }): string {
  const links = [
    opts.signIn
      ? '<li><a href="/signin">Sign in</a>: get a JWT and create API keys</li>'
      : '<li>Sign in with your identity provider to get a JWT, then create API keys with <code>POST /api/v1/keys/create</code></li>',
    '<li><a href="/docs">API reference</a> (REST <code>/api/v1</code>)</li>',
    '<li><a href="/api/v1/openapi.json">OpenAPI document</a> for client generators</li>',
    '<li><a href="/readyz">Status</a> (readiness of the database and the market data)</li>',
    ...(opts.metrics ? ['<li><a href="/metrics">Metrics</a> (Prometheus)</li>'] : []),
  ];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Market Intelligence API</title>
<style>${LANDING_STYLE}</style>
</head>
<body>
<main>
<h1>Market Intelligence API</h1>
<p class="lead">Explained crypto trading signals, the BTC market regime and on-chain health, over REST (<code>/api/v1</code>) and MCP (<code>/mcp</code>).</p>
<ul>
${links.join('\n')}
</ul>
</main>
</body>
</html>
`;
}

/** Only the page's own inline style applies; no script, no fetch, no frame. */
export const LANDING_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(LANDING_STYLE, 'utf8').digest('base64')}'`,
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');
