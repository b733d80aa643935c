import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { get } from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REGIME_ORDER, THESIS_METRICS } from '../../src/engine/thesis.ts';
import { REGIME_LEVELS, SIGNAL_LEVELS } from '../../src/engine/types.ts';
import { DASHBOARD_REQUESTS_PER_MINUTE } from '../../src/services/access.ts';
import { CHARTS_FILE, STATIC_DIR } from '../../src/web/routes.ts';
import { expectError, harnessUnavailable, startHarness, type Harness } from '../helpers/harness.ts';

/**
 * The dashboard's server side without a browser: its data routes read the same operations as
 * /api/v1 (same answers), are not API usage (no API quota counted) but have their own
 * per-address budget, keep the signal history tier-gated, stay out of the OpenAPI document;
 * its files are served from this process (no CDN).
 */

const SKIP = (await harnessUnavailable()) ?? undefined;
let h: Harness;

before(async () => {
  if (SKIP) return;
  h = await startHarness();
});
after(async () => h?.stop());

describe('dashboard data routes', { skip: SKIP }, () => {
  test('answer what /api/v1 answers, for the same operations', async () => {
    for (const p of [
      '/signals',
      '/signals/eth?include_factors=true',
      '/regime',
      '/chain-health',
      '/chain-metrics/sol',
      '/assets',
      '/prices/btc?days=30',
    ]) {
      const web = await h.request('GET', `/app/data${p}`);
      const api = await h.request('GET', `/api/v1${p}`);
      assert.equal(web.status, 200, `${p}: ${web.raw}`);
      assert.deepEqual(web.body.data, api.body.data, p);
    }
    expectError(await h.request('GET', '/app/data/prices/btc?days=0'), 400, 'INVALID_PARAMETER');
    expectError(await h.request('GET', '/app/data/signals/NOPE'), 404, 'NOT_FOUND');
  });

  test('browsing is not API usage: the API quota of the address is untouched; the dashboard budget is its own', async () => {
    const ip = h.freshIp();
    for (let i = 0; i < 20; i++) assert.equal((await h.request('GET', '/app/data/signals', { ip })).status, 200);
    const r = await h.request('GET', '/app/data/regime', { ip });
    assert.equal(r.headers['x-ratelimit-limit'], String(DASHBOARD_REQUESTS_PER_MINUTE));
    assert.equal(r.headers['x-ratelimit-remaining'], String(DASHBOARD_REQUESTS_PER_MINUTE - 21));
    // The unauthenticated API tier (5 per minute) of the same address is still whole.
    const api = await h.request('GET', '/api/v1/signals', { ip });
    assert.equal(api.status, 200);
    assert.equal(api.headers['x-ratelimit-remaining'], '9', 'first of 10 per day for the unauthenticated tier');
  });

  test('a scraper over the per-address budget gets 429 with Retry-After; another address is unaffected', async () => {
    const ip = h.freshIp();
    let last = 0;
    for (let i = 0; i < DASHBOARD_REQUESTS_PER_MINUTE; i++) last = (await h.request('GET', '/app/data/assets', { ip })).status;
    assert.equal(last, 200);
    const r = await h.request('GET', '/app/data/assets', { ip });
    expectError(r, 429, 'RATE_LIMITED');
    assert.ok(Number(r.headers['retry-after']) >= 1);
    assert.match(r.body.error.message, /dashboard requests from this address/);
    // The message says how long to wait, as every other 429 does (the Retry-After value).
    assert.match(
      r.body.error.message,
      new RegExp(`; retry in ${r.headers['retry-after']} s, or for automated access use the API with a key$`),
    );
    assert.equal((await h.request('GET', '/app/data/assets')).status, 200);
  });

  test('the signal history stays tier-gated: none or a free user is refused, a pro user is served (with the JWT)', async () => {
    expectError(await h.request('GET', '/app/data/signal-history/btc'), 401, 'UNAUTHORIZED');
    const free = await h.keyFor('free');
    const refused = await h.request('GET', '/app/data/signal-history/btc', { token: free.jwt });
    expectError(refused, 403, 'TIER_REQUIRED');
    assert.match(refused.body.error.message, /pro or api tier; your tier is free/);
    const pro = await h.keyFor('pro');
    const ok = await h.request('GET', '/app/data/signal-history/btc?days=90', { token: pro.jwt });
    assert.equal(ok.status, 200, ok.raw);
    const api = await h.request('GET', '/api/v1/signal-history/btc?days=90', { token: pro.key });
    assert.deepEqual(ok.body.data, api.body.data);
    // It did not count against the user's key or account quota.
    const keys = await h.request('GET', '/api/v1/keys', { token: pro.jwt });
    assert.equal(keys.body.data.keys[0].usage.requests_total, 1, 'only the API call');
  });

  test('an API key sent to the data routes is API usage: its tier quota and usage count, not the per-address budget', async () => {
    const pro = await h.keyFor('pro', 'dashboard-with-key');
    const first = await h.request('GET', '/app/data/signal-history/btc', { token: pro.key });
    assert.equal(first.status, 200, first.raw);
    assert.equal(first.headers['x-ratelimit-limit'], '5000', "the pro tier's day limit, not the dashboard budget");
    const again = await h.request('GET', '/app/data/signals', { token: pro.key });
    assert.equal(Number(again.headers['x-ratelimit-remaining']), Number(first.headers['x-ratelimit-remaining']) - 1);
    await h.svc.usage.flush();
    const keys = await h.request('GET', '/api/v1/keys', { token: pro.jwt });
    assert.equal(keys.body.data.keys[0].usage.requests_total, 2, 'both counted on the key');
  });

  test('key management and theses are not dashboard data routes: they stay on /api/v1 under its rules', async () => {
    for (const p of ['/keys', '/thesis']) expectError(await h.request('GET', `/app/data${p}`), 404, 'NOT_FOUND');
  });

  test('the routes are not in the OpenAPI document', async () => {
    const spec = (await h.request('GET', '/api/v1/openapi.json')).body;
    assert.ok(!Object.keys(spec.paths).some((p) => p.startsWith('/app')));
    assert.ok(spec.paths['/api/v1/prices/{asset}']);
  });
});

describe('dashboard pages and files', { skip: SKIP }, () => {
  test("the page's configuration carries the engine's level and metric lists (app.js keeps no copy of them)", async () => {
    const r = await h.request('GET', '/');
    const json = /<script type="application\/json" id="config">(.*?)<\/script>/s.exec(r.raw)?.[1];
    assert.ok(json, 'the #config data block');
    const config = JSON.parse(json) as Record<string, unknown>;
    assert.deepEqual(config.signalLevels, [...SIGNAL_LEVELS]);
    assert.deepEqual(config.regimeLevels, [...REGIME_ORDER].reverse());
    assert.deepEqual([...(config.regimeLevels as string[])].sort(), [...REGIME_LEVELS].sort());
    assert.deepEqual(config.thesisMetrics, [...THESIS_METRICS]);
    const js = readFileSync(path.join(STATIC_DIR, 'app.js'), 'utf8');
    assert.doesNotMatch(js, /\[\s*'strong_buy'|\[\s*'bull'|\[\s*'price_usd'/, 'no list literal of levels or metrics in app.js');
  });

  test('every page path serves the document with a strict CSP; its script, style and the chart library come from this origin', async () => {
    for (const p of ['/', '/asset/bitcoin', '/asset/BTC', '/chains', '/account', '/signin', '/asset/xyz']) {
      const r = await h.request('GET', p);
      // An asset page for an asset the service does not know is a 404; the page says so.
      assert.equal(r.status, p === '/asset/xyz' ? 404 : 200, p);
      assert.match(r.raw, /<script type="module" src="\/app\/static\/app.js/, p);
      assert.match(String(r.headers['content-security-policy']), /^default-src 'none'; script-src 'self'; style-src 'self'/);
      assert.equal(r.headers['x-frame-options'], 'DENY');
      // The footer's status link is the data's freshness (every series, its age), not the load balancer's probe.
      assert.match(r.raw, /<a href="\/api\/v1\/status">Data status<\/a>/, p);
    }
    const js = await h.request('GET', '/app/static/app.js', { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(js.status, 200);
    assert.match(String(js.headers['content-type']), /javascript/);
    assert.equal(js.headers['content-encoding'], 'gzip');
    const css = await h.request('GET', '/app/static/app.css');
    assert.equal(css.raw, readFileSync(path.join(STATIC_DIR, 'app.css'), 'utf8'));
    const lib = await h.request('GET', `/app/vendor/${CHARTS_FILE}`);
    assert.equal(lib.status, 200);
    assert.match(lib.raw, /LightweightCharts/);
    // Nothing else from node_modules is reachable.
    // A path that leaves the folder (the static plugin's 403) is not found, like any other
    // path; sent over the socket as written (a URL, fetch and inject would resolve the dots).
    const asWritten = (p: string) =>
      new Promise<{ status: number; body: { error?: { code: string } } }>((resolve, reject) => {
        const { hostname, port } = new URL(h.base);
        get({ hostname, port, path: p }, (res) => {
          let raw = '';
          res.on('data', (d) => (raw += d));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(raw) }));
        }).on('error', reject);
      });
    for (const p of [
      '/app/vendor/lightweight-charts.development.mjs',
      '/app/vendor/../package.json',
      '/app/static/../routes.ts',
      '/app/static/../../package.json',
      '/app/static/%2e%2e/%2e%2e/package.json',
    ]) {
      const r = await asWritten(p);
      assert.equal(r.status, 404, p);
      assert.equal(r.body.error?.code, 'NOT_FOUND', p);
    }
  });
});
