import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { harnessUnavailable, startHarness, type Harness } from '../helpers/harness.ts';

/**
 * The HTTP edge: CORS for browser clients (CORS_ORIGINS), compression, ETag / 304 and
 * Cache-Control, Prometheus /metrics, and the landing page at `/`.
 */

const SKIP = (await harnessUnavailable()) ?? undefined;
const ALLOWED = 'https://app.example.com';
let h: Harness;

before(async () => {
  if (SKIP) return;
  h = await startHarness({ config: { CORS_ORIGINS: `${ALLOWED},http://localhost:5173` } });
});
after(async () => h?.stop());

describe('CORS', { skip: SKIP }, () => {
  test('preflight from an allowed origin: methods, Authorization allowed, no credentials, no quota used', async () => {
    const ip = h.freshIp();
    const r = await h.request('OPTIONS', '/api/v1/signals', {
      ip,
      headers: { origin: ALLOWED, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    assert.equal(r.status, 204);
    assert.equal(r.headers['access-control-allow-origin'], ALLOWED);
    assert.match(String(r.headers['access-control-allow-methods']), /GET/);
    assert.match(String(r.headers['access-control-allow-headers']), /Authorization/i);
    assert.equal(r.headers['access-control-allow-credentials'], undefined);
    const after = await h.request('GET', '/api/v1/assets', { ip });
    assert.equal(after.headers['x-ratelimit-remaining'], '9', 'the preflight consumed no quota');
  });

  test('an allowed origin may read the answer and the rate-limit headers', async () => {
    const r = await h.request('GET', '/api/v1/assets', { headers: { origin: ALLOWED } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], ALLOWED);
    assert.match(String(r.headers['access-control-expose-headers']), /X-RateLimit-Remaining/);
    assert.match(String(r.headers['access-control-expose-headers']), /X-Request-Id/);
    assert.match(String(r.headers.vary), /Origin/);
  });

  test('an OPTIONS that is not a preflight (no Origin, curl -X OPTIONS) is 204 with Allow, an unknown path the envelope 404; no quota used', async () => {
    const ip = h.freshIp();
    for (const headers of [{}, { origin: ALLOWED }, { 'access-control-request-method': 'GET' }] as Record<string, string>[]) {
      const r = await h.request('OPTIONS', '/api/v1/signals', { ip, headers });
      assert.equal(r.status, 204, `${JSON.stringify(headers)}: ${r.raw}`);
      assert.equal(r.headers.allow, 'GET, HEAD, OPTIONS');
      assert.equal(r.raw, '');
    }
    const keys = await h.request('OPTIONS', '/api/v1/keys', { ip });
    assert.equal(keys.status, 204);
    assert.equal(keys.headers.allow, 'GET, HEAD, OPTIONS');
    assert.equal((await h.request('OPTIONS', '/api/v1/keys/create', { ip })).headers.allow, 'POST, OPTIONS');
    const unknown = await h.request('OPTIONS', '/api/v1/nope', { ip });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.status, 'error');
    assert.equal(unknown.body.error.code, 'NOT_FOUND');
    assert.equal(unknown.headers['x-ratelimit-remaining'], '10', "the client address's limits, nothing counted");
    const after = await h.request('GET', '/api/v1/assets', { ip });
    assert.equal(after.headers['x-ratelimit-remaining'], '9', 'the OPTIONS requests consumed no quota');
  });

  test('another origin gets no Access-Control-Allow-Origin (the browser refuses)', async () => {
    const pre = await h.request('OPTIONS', '/api/v1/signals', {
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    const r = await h.request('GET', '/api/v1/assets', { headers: { origin: 'https://evil.example' } });
    assert.equal(r.headers['access-control-allow-origin'], undefined);
  });
});

describe('compression and caching', { skip: SKIP }, () => {
  test('gzip with Accept-Encoding: gzip; identity without', async () => {
    const { key } = await h.keyFor('pro');
    const plain = await h.request('GET', '/api/v1/signals?include_factors=true', { token: key });
    assert.equal(plain.status, 200);
    assert.equal(plain.headers['content-encoding'], undefined);
    const res = await h.app.inject({
      method: 'GET',
      url: '/api/v1/signals?include_factors=true',
      headers: { authorization: `Bearer ${key}`, 'accept-encoding': 'gzip' },
    });
    assert.equal(res.headers['content-encoding'], 'gzip');
    assert.match(String(res.headers.vary), /Accept-Encoding/i);
    const body = JSON.parse(gunzipSync(res.rawPayload).toString('utf8'));
    assert.equal(body.status, 'ok');
    console.log(`/signals?include_factors=true: ${Buffer.byteLength(plain.raw)} bytes identity, ${res.rawPayload.length} bytes gzip`);
    assert.ok(res.rawPayload.length < Buffer.byteLength(plain.raw) / 3);
  });

  test('market data: weak ETag, Cache-Control until the next UTC midnight (public without credentials, private with a key), Vary: Authorization; 304 on If-None-Match', async () => {
    const { key } = await h.keyFor('pro');
    const anonymous = await h.request('GET', '/api/v1/regime');
    assert.match(String(anonymous.headers['cache-control']), /^public, max-age=\d+$/);
    // max-age is the whole seconds to the next 00:00 UTC (at least 60) at the moment of the request,
    // somewhere between t0 and t1; the service keeps one value per second, computed at the first
    // request of that second (possibly at its .000 ms, one more than later in it): hence t0's whole second.
    const toMidnight = (t: number) => {
      const d = new Date(t);
      return Math.max(60, Math.floor((Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - t) / 1000));
    };
    const t0 = Date.now();
    const r = await h.request('GET', '/api/v1/regime', { token: key });
    const t1 = Date.now();
    assert.equal(r.status, 200);
    const etag = String(r.headers.etag);
    assert.match(etag, /^W\/"[\w-]+"$/);
    // A shared cache must not answer keyed (metered) requests.
    const m = /^private, max-age=(\d+)$/.exec(String(r.headers['cache-control']));
    assert.ok(m, String(r.headers['cache-control']));
    const [lo, hi] = [toMidnight(Math.floor(t0 / 1000) * 1000), toMidnight(t1)].sort((a, b) => a - b);
    assert.ok(Number(m[1]) >= lo! && Number(m[1]) <= hi!, `max-age ${m[1]} outside ${lo}..${hi}`);
    assert.match(String(r.headers.vary), /Authorization/);

    const again = await h.request('GET', '/api/v1/regime', { token: key });
    assert.equal(again.headers.etag, etag, 'same data, same ETag (meta differs)');
    const notModified = await h.request('GET', '/api/v1/regime', { token: key, headers: { 'if-none-match': `"x", ${etag}` } });
    assert.equal(notModified.status, 304);
    assert.equal(notModified.raw, '');
    assert.equal(notModified.headers.etag, etag);
    assert.ok(notModified.headers['x-ratelimit-remaining'], 'a 304 keeps the rate-limit headers');
    const changed = await h.request('GET', '/api/v1/regime', { token: key, headers: { 'if-none-match': 'W/"other"' } });
    assert.equal(changed.status, 200);
  });

  test('Vary names Authorization and Accept-Encoding on every market answer: identity 200, compressed 200, 304 (the same as the 200)', async () => {
    const { key } = await h.keyFor('pro');
    // The request headers named (Origin too: this harness has CORS_ORIGINS), each once.
    const varied = (v: unknown) =>
      String(v)
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .sort();
    const VARIED = ['accept-encoding', 'authorization', 'origin'];
    for (const token of [key, undefined]) {
      // Over 1 KB: compressed when asked; identity without Accept-Encoding, which chose it too.
      const identity = await h.request('GET', '/api/v1/signals', { token });
      assert.equal(identity.status, 200);
      assert.equal(identity.headers['content-encoding'], undefined);
      assert.deepEqual(varied(identity.headers.vary), VARIED);
      const gzip = await h.request('GET', '/api/v1/signals', { token, headers: { 'accept-encoding': 'gzip' } });
      assert.equal(gzip.headers['content-encoding'], 'gzip');
      assert.deepEqual(varied(gzip.headers.vary), VARIED);
      // A 304 carries the Vary, Cache-Control and ETag the 200 would have (RFC 9110 section 15.4.5).
      const etag = String(gzip.headers.etag);
      const notModified = await h.request('GET', '/api/v1/signals', {
        token,
        headers: { 'accept-encoding': 'gzip', 'if-none-match': etag },
      });
      assert.equal(notModified.status, 304);
      assert.deepEqual(varied(notModified.headers.vary), varied(gzip.headers.vary));
      assert.equal(notModified.headers.etag, etag);
      assert.equal(String(notModified.headers['cache-control']).split(',')[0], String(gzip.headers['cache-control']).split(',')[0]);
    }
  });

  test('the OpenAPI document: weak ETag, Cache-Control max-age=0, 304 on If-None-Match (gzip too), no quota used', async () => {
    const ip = h.freshIp();
    const doc = await h.request('GET', '/api/v1/openapi.json', { ip });
    assert.equal(doc.status, 200);
    assert.match(doc.body.openapi, /^3\./);
    const etag = String(doc.headers.etag);
    assert.match(etag, /^W\/"[A-Za-z0-9_-]{27}"$/);
    assert.equal(doc.headers['cache-control'], 'public, max-age=0');
    assert.equal((await h.request('GET', '/api/v1/openapi.json', { ip })).headers.etag, etag, 'the same tag each time');
    const notModified = await h.request('GET', '/api/v1/openapi.json', { ip, headers: { 'if-none-match': etag } });
    assert.equal(notModified.status, 304);
    assert.equal(notModified.raw, '');
    assert.equal(notModified.headers.etag, etag);
    assert.equal(notModified.headers['cache-control'], 'public, max-age=0');
    const varied = (v: unknown) =>
      String(v)
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .sort();
    assert.deepEqual(varied(doc.headers.vary), ['accept-encoding', 'authorization', 'origin']);
    assert.deepEqual(varied(notModified.headers.vary), varied(doc.headers.vary));
    // What a generator sends: compressed, then revalidated with the tag it got.
    const gzip = await h.app.inject({ method: 'GET', url: '/api/v1/openapi.json', headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gzip.headers['content-encoding'], 'gzip');
    assert.equal(gzip.headers.etag, etag);
    const again = await h.app.inject({
      method: 'GET',
      url: '/api/v1/openapi.json',
      headers: { 'accept-encoding': 'gzip', 'if-none-match': String(gzip.headers.etag) },
    });
    assert.equal(again.statusCode, 304);
    const keyed = await h.request('GET', '/api/v1/openapi.json', { token: (await h.keyFor('free')).key });
    assert.equal(keyed.headers['cache-control'], 'private, max-age=0');
    assert.equal(keyed.headers.etag, etag);
    const after = await h.request('GET', '/api/v1/assets', { ip });
    assert.equal(after.headers['x-ratelimit-remaining'], '9', 'the document is unmetered');
  });

  test('signal history (key only) is private; keys, theses and errors are no-store', async () => {
    const pro = await h.keyFor('pro');
    const hist = await h.request('GET', '/api/v1/signal-history/BTC?days=7', { token: pro.key });
    assert.equal(hist.status, 200, hist.raw);
    assert.match(String(hist.headers['cache-control']), /^private, max-age=\d+$/);
    const keys = await h.request('GET', '/api/v1/keys', { token: pro.jwt });
    assert.equal(keys.status, 200, keys.raw);
    assert.equal(keys.headers['cache-control'], 'no-store');
    assert.equal(keys.headers.etag, undefined);
    const theses = await h.request('GET', '/api/v1/thesis', { token: pro.key });
    assert.equal(theses.status, 200, theses.raw);
    assert.equal(theses.headers['cache-control'], 'no-store');
    const missing = await h.request('GET', '/api/v1/signals/NOPE', { token: pro.key });
    assert.equal(missing.status, 404);
    assert.equal(missing.headers['cache-control'], 'no-store');
  });
});

describe('metrics and landing page', { skip: SKIP }, () => {
  test('/metrics counts requests by route template and status, limiter decisions and dependency health', async () => {
    const ip = h.freshIp();
    for (let i = 0; i < 6; i++) await h.request('GET', '/api/v1/signals/BTC', { ip });
    await h.request('GET', '/api/v1/signals/NOPE');
    const r = await h.request('GET', '/metrics');
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const line = (re: RegExp) => r.raw.split('\n').find((l) => re.test(l));
    const ok = line(/^http_requests_total\{method="GET",route="\/api\/v1\/signals\/:asset",status_code="200"\} \d+/);
    assert.ok(ok && Number(ok.split(' ')[1]) >= 5, ok);
    assert.ok(line(/^http_requests_total\{method="GET",route="\/api\/v1\/signals\/:asset",status_code="429"\} [1-9]/));
    assert.ok(line(/^http_requests_total\{method="GET",route="\/api\/v1\/signals\/:asset",status_code="404"\} [1-9]/));
    assert.ok(line(/^http_request_duration_seconds_bucket\{le="0\.1",method="GET",route="\/api\/v1\/signals\/:asset",status_code="200"\}/));
    assert.ok(line(/^rate_limit_decisions_total\{tier="unauthenticated",decision="limited"\} [1-9]/));
    assert.ok(line(/^rate_limit_decisions_total\{tier="unauthenticated",decision="allowed"\} [1-9]/));
    assert.ok(line(/^dependency_up\{dependency="database"\} 1$/));
    assert.ok(line(/^dependency_up\{dependency="data"\} 1$/));
    assert.equal(line(/dependency="redis"/), undefined, 'Redis is not configured: no series');
    assert.doesNotMatch(r.raw, /svc_live_|10\.\d+\.\d+\.\d+/, 'no key or address in the labels');
  });

  test('/ is the dashboard: an HTML page with a strict CSP, its own scripts only, and links to the reference, OpenAPI and the status', async () => {
    const r = await h.request('GET', '/');
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^text\/html/);
    assert.match(String(r.headers['content-security-policy']), /default-src 'none'; script-src 'self'; style-src 'self'/);
    assert.doesNotMatch(r.raw, /(src|href)=["']?(https?:)?\/\//i, 'no CDN, no external fonts');
    assert.ok(r.raw.includes('<script type="module" src="/app/static/app.js"></script>'));
    for (const href of ['/docs', '/api/v1/openapi.json', '/api/v1/status', '/account']) assert.ok(r.raw.includes(`href="${href}"`), href);
    // This harness uses an external identity provider: the page is told so (sign-in links to it).
    assert.match(r.raw, new RegExp(`"signIn":"${h.idp.issuer.replace(/[.]/g, '\\.')}"`));
  });

  test('a trailing slash is the same page or route (a typed or pasted URL), not a 404', async () => {
    for (const path of ['/account/', '/chains/', '/asset/bitcoin/']) {
      const r = await h.request('GET', path);
      assert.equal(r.status, 200, path);
      assert.match(String(r.headers['content-type']), /^text\/html/, path);
    }
    const slash = await h.request('GET', '/api/v1/assets/');
    assert.equal(slash.status, 200, slash.raw);
    assert.deepEqual(slash.body.data, (await h.request('GET', '/api/v1/assets')).body.data);
    const unknown = await h.request('GET', '/api/v1/nope/');
    assert.equal(unknown.status, 404);
  });

  test("a signed-in user's JWT on a mistyped /api/v1 path gets the 404, not a 401 (no failed-auth count); a bad API key is still refused", async () => {
    const jwt = await h.jwt('typo-user');
    const typo = await h.request('GET', '/api/v1/key', { token: jwt });
    assert.equal(typo.status, 404, typo.raw);
    assert.equal(typo.body.error.code, 'NOT_FOUND');
    assert.equal(typo.headers['x-service-tier'], 'unauthenticated');
    const badKey = await h.request('GET', '/api/v1/key', { token: 'svc_live_0000000000000000000000000000000000000000' });
    assert.equal(badKey.status, 401, badKey.raw);
  });

  test('a browser navigating to a page that does not exist gets an HTML 404 with links; API clients keep the JSON envelope', async () => {
    const html = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };
    const page = await h.request('GET', '/asset/', { headers: html });
    assert.equal(page.status, 404);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(String(page.headers['content-security-policy']), /default-src 'none'/);
    // The same page headers as every other HTML page (it lacked the framing and referrer ones).
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.equal(page.headers['referrer-policy'], 'no-referrer');
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
    assert.match(page.raw, /<h1>Page not found<\/h1>/);
    assert.match(page.raw, /<code>\/asset\/<\/code>/);
    assert.ok(page.raw.includes('<a href="/">Overview</a>'));
    // The same pages as the dashboard's navigation (the track record was missing here).
    const links = (html: string) => [...html.matchAll(/<a href="([^"]+)"[^>]*>([^<]+)<\/a>/g)].map((m) => `${m[1]} ${m[2]}`);
    const dashboard = await h.request('GET', '/', { headers: html });
    const nav = /<nav aria-label="Main">([\s\S]*?)<\/nav>/.exec(dashboard.raw)?.[1] ?? '';
    assert.ok(links(nav).includes('/track-record Track record'), nav);
    assert.deepEqual(links(page.raw), links(nav));
    // The path is escaped, never echoed as markup.
    const evil = await h.request('GET', '/%3Cscript%3Ex%3C%2Fscript%3E', { headers: html });
    assert.equal(evil.status, 404);
    assert.doesNotMatch(evil.raw, /<script>/);
    // The API, even from a browser, and any client that does not ask for HTML: the envelope.
    for (const [path, headers] of [
      ['/api/v1/nope', html],
      ['/nope', {}],
    ] as const) {
      const r = await h.request('GET', path, { headers });
      assert.equal(r.status, 404, path);
      assert.equal(r.body.error.code, 'NOT_FOUND', path);
    }
  });
});

describe('METRICS=off', { skip: SKIP }, () => {
  test('/metrics is a 404 and the landing page does not link it', async () => {
    const off = await startHarness({ config: { METRICS: 'off' } });
    try {
      assert.equal((await off.request('GET', '/metrics')).status, 404);
      assert.ok(!(await off.request('GET', '/')).raw.includes('/metrics'));
    } finally {
      await off.stop();
    }
  });
});
