import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLiveSources, UpstreamError, type LiveSource, type LiveSourceOptions } from '../../src/providers/live/index.ts';
import { parseRetryAfter } from '../../src/providers/live/http.ts';
import { fixture, startFixtureServer } from '../helpers/fixture-server.ts';

/** The recorded klines fixture covers 2026-02-25..2026-03-10. */
const KLINES = fixture('binance/api_v3_klines_BTCUSDT_1d.reconstructed.json');
const AFTER = '2026-02-24';
const TODAY = '2026-03-11';

function btc(url: string, opts: LiveSourceOptions = {}): LiveSource {
  return createLiveSources({ baseUrls: { binance: url }, retryMinTimeoutMs: 10, ...opts }).find((s) => s.series === 'candles:bitcoin')!;
}

async function rejects(p: Promise<unknown>): Promise<UpstreamError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof UpstreamError, `an UpstreamError, got ${String(e)}`);
    return e;
  }
  assert.fail('expected a rejection');
}

describe('shared HTTP client: retries, Retry-After, timeouts, budget', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    srv = await startFixtureServer(() => ({ body: KLINES }));
  });
  after(() => srv.close());

  test('429 with Retry-After: 1 is retried after at least one second, then succeeds', async () => {
    srv.log.length = 0;
    srv.script({ status: 429, headers: { 'retry-after': '1' }, body: { code: -1003, msg: 'Too many requests' } });
    const got = await btc(srv.url).fetch(AFTER, TODAY);
    assert.equal(got.points.length, 14);
    assert.equal(srv.log.length, 2);
    assert.ok(srv.log[1]!.at - srv.log[0]!.at >= 1000, `waited ${srv.log[1]!.at - srv.log[0]!.at} ms`);
  });

  test('a Retry-After beyond the limit fails at once with the status', async () => {
    srv.log.length = 0;
    srv.script({ status: 429, headers: { 'retry-after': '3600' } });
    const e = await rejects(btc(srv.url).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 429);
    assert.match(e.message, /Retry-After 3600 s/);
    assert.equal(srv.log.length, 1);
  });

  test("a host's Retry-After holds back every series of that host: a longer one fails them unsent, a short one makes them wait", async () => {
    srv.log.length = 0;
    const sources = createLiveSources({ baseUrls: { binance: srv.url }, retryMinTimeoutMs: 10, maxRetryAfterMs: 5000 });
    const btcS = sources.find((s) => s.series === 'candles:bitcoin')!;
    const eth = sources.find((s) => s.series === 'candles:ethereum')!;
    srv.script({ status: 429, headers: { 'retry-after': '3600' } });
    assert.equal((await rejects(btcS.fetch(AFTER, TODAY))).status, 429);
    // Another series of the host is not sent (Binance bans an address that goes on after a 429).
    const e = await rejects(eth.fetch(AFTER, TODAY));
    assert.equal(e.kind, 'http');
    assert.match(
      e.message,
      /not sent: 127\.0\.0\.1:\d+ asked to wait until \d{4}-\d\d-\d\dT[\d:.]+Z \(HTTP 429, Retry-After 3600 s; 3600 s left, longer than this request may wait\)/,
    );
    assert.equal(srv.log.length, 1, 'the second series sent nothing');

    // A short Retry-After (418, Binance's ban answer, not retried itself): the next series waits it out.
    srv.log.length = 0;
    const fresh = createLiveSources({ baseUrls: { binance: srv.url }, retryMinTimeoutMs: 10, maxRetryAfterMs: 5000 });
    srv.script({ status: 418, headers: { 'retry-after': '1' } });
    assert.equal((await rejects(fresh.find((s) => s.series === 'candles:bitcoin')!.fetch(AFTER, TODAY))).status, 418);
    assert.equal((await fresh.find((s) => s.series === 'candles:ethereum')!.fetch(AFTER, TODAY)).points.length, 14);
    assert.equal(srv.log.length, 2);
    assert.ok(srv.log[1]!.at - srv.log[0]!.at >= 1000, `waited ${srv.log[1]!.at - srv.log[0]!.at} ms`);
  });

  test('a request waiting out a short pause checks again before it is sent: a longer pause set meanwhile holds it back too', async () => {
    const sent: string[] = [];
    const scripted: typeof fetch = async (input) => {
      const url = String(input);
      sent.push(url);
      // The first request (ETH) was in flight before any pause: its answer, a ban of an hour,
      // comes while the other series wait out a 1 s pause.
      if (sent.length === 1) {
        await new Promise((r) => setTimeout(r, 400));
        return new Response(null, { status: 418, headers: { 'retry-after': '3600' } });
      }
      if (sent.length === 2) return new Response(null, { status: 429, headers: { 'retry-after': '1' } });
      return fetch(input);
    };
    const sources = createLiveSources({ baseUrls: { binance: srv.url }, retryMinTimeoutMs: 10, maxRetryAfterMs: 5000, fetch: scripted });
    const of = (series: string) => sources.find((s) => s.series === series)!;
    const eth = rejects(of('candles:ethereum').fetch(AFTER, TODAY));
    await new Promise((r) => setTimeout(r, 50));
    const btcS = rejects(of('candles:bitcoin').fetch(AFTER, TODAY));
    await new Promise((r) => setTimeout(r, 50));
    // Paused for about 1 s by BTC's 429: SOL waits it out (a short pause), then must see the ban.
    const sol = await rejects(of('candles:solana').fetch(AFTER, TODAY));
    assert.equal((await eth).status, 418);
    assert.match((await btcS).message, /not sent: .*HTTP 418, Retry-After 3600 s/);
    assert.match(
      sol.message,
      /not sent: .*asked to wait until .*HTTP 418, Retry-After 3600 s; 3\d{3} s left, longer than this request may wait\)/,
    );
    assert.equal(sent.length, 2, `sent during the ban: ${sent.slice(2).join(', ')}`);
  });

  test('an absurd Retry-After (1e20 s) pauses the host until the last representable time, named in the message', async () => {
    srv.log.length = 0;
    const sources = createLiveSources({ baseUrls: { binance: srv.url }, retryMinTimeoutMs: 10 });
    srv.script({ status: 429, headers: { 'retry-after': '99999999999999999999' } });
    assert.equal((await rejects(sources.find((s) => s.series === 'candles:bitcoin')!.fetch(AFTER, TODAY))).status, 429);
    const e = await rejects(sources.find((s) => s.series === 'candles:ethereum')!.fetch(AFTER, TODAY));
    assert.equal(e.kind, 'http');
    assert.match(e.message, /not sent: 127\.0\.0\.1:\d+ asked to wait until \+275760-09-13T00:00:00\.000Z \(HTTP 429, Retry-After/);
    assert.equal(srv.log.length, 1);
  });

  test('5xx then success; 5xx on every attempt is an http error after retries+1 attempts', async () => {
    srv.log.length = 0;
    srv.script({ status: 502 }, { status: 503 });
    assert.equal((await btc(srv.url).fetch(AFTER, TODAY)).points.length, 14);
    assert.equal(srv.log.length, 3);
    srv.log.length = 0;
    srv.script({ status: 500 }, { status: 500 }, { status: 500 });
    const e = await rejects(btc(srv.url, { retries: 2 }).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 500);
    assert.match(e.message, /Binance spot \/api\/v3\/klines BTCUSDT 1d: \/api\/v3\/klines\?symbol=BTCUSDT.*HTTP 500/);
    assert.equal(srv.log.length, 3);
  });

  test('a 4xx other than 429 is not retried', async () => {
    srv.log.length = 0;
    srv.script({ status: 400, body: { code: -1121, msg: 'Invalid symbol.' } });
    const e = await rejects(btc(srv.url).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'http');
    assert.equal(e.status, 400);
    assert.equal(srv.log.length, 1);
  });

  test('a hanging upstream is a timeout after retries+1 attempts of timeoutMs each', async () => {
    srv.log.length = 0;
    srv.script({ hang: true }, { hang: true });
    const t0 = Date.now();
    const e = await rejects(btc(srv.url, { timeoutMs: 200, retries: 1 }).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'timeout');
    assert.match(e.message, /no complete answer within 200 ms/);
    assert.equal(srv.log.length, 2);
    assert.ok(Date.now() - t0 >= 400);
  });

  test('a timeout then success', async () => {
    srv.log.length = 0;
    srv.script({ hang: true });
    assert.equal((await btc(srv.url, { timeoutMs: 1000, retries: 1 }).fetch(AFTER, TODAY)).points.length, 14);
    assert.equal(srv.log.length, 2);
  });

  test('a body that is not JSON is a format error, not retried', async () => {
    srv.log.length = 0;
    srv.script({ body: '<html>maintenance</html>' });
    const e = await rejects(btc(srv.url).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'format');
    assert.match(e.message, /response is not JSON \(starts with '<html>maintenance/);
    assert.equal(srv.log.length, 1);
  });

  test('a body larger than maxBodyBytes is a format error, not retried, read no further; an endless one too', async () => {
    srv.log.length = 0;
    srv.script({ body: KLINES });
    const e = await rejects(btc(srv.url, { maxBodyBytes: KLINES.length - 1 }).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'format');
    assert.match(e.message, new RegExp(`: response larger than ${KLINES.length - 1} bytes, not read further$`));
    assert.equal(srv.log.length, 1);
    assert.equal((await btc(srv.url, { maxBodyBytes: KLINES.length }).fetch(AFTER, TODAY)).points.length, 14, 'at the bound: read');

    // An endless body without Content-Length: stopped once past the bound, long before the timeout.
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const endless = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
      };
      res.on('drain', pump);
      res.on('error', () => {});
      pump();
    });
    await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve));
    try {
      const t0 = performance.now();
      const big = await rejects(
        btc(`http://127.0.0.1:${(endless.address() as AddressInfo).port}`, { maxBodyBytes: 4 * 1024 * 1024, timeoutMs: 30_000 }).fetch(
          AFTER,
          TODAY,
        ),
      );
      assert.equal(big.kind, 'format');
      assert.match(big.message, /response larger than 4194304 bytes/);
      assert.ok(performance.now() - t0 < 10_000, `stopped early: ${Math.round(performance.now() - t0)} ms`);
      assert.ok(sent < 64 * 1024 * 1024, `the client stopped reading: ${sent} bytes sent`);
    } finally {
      endless.closeAllConnections();
      await new Promise((resolve) => endless.close(resolve));
    }
  });

  test('connection refused is a network error after retries', async () => {
    const dead = await startFixtureServer();
    const url = dead.url;
    await dead.close();
    const e = await rejects(btc(url, { retries: 1 }).fetch(AFTER, TODAY));
    assert.equal(e.kind, 'network');
  });

  test('the per-host budget holds requests back; an abort while waiting is a budget error', async () => {
    srv.log.length = 0;
    const s = btc(srv.url, { hostBudgetPerMinute: 1 });
    await s.fetch(AFTER, TODAY);
    const e = await rejects(s.fetch(AFTER, TODAY, AbortSignal.timeout(300)));
    assert.equal(e.kind, 'budget');
    assert.match(e.message, /no request slot for 127\.0\.0\.1:\d+ within the budget of 1\/min \(aborted while waiting\)/);
    assert.equal(srv.log.length, 1, 'the second request was never sent');
  });

  test('the budget is per host and shared by the series of that host', async () => {
    srv.log.length = 0;
    const sources = createLiveSources({ baseUrls: { binance: srv.url }, hostBudgetPerMinute: 1 });
    const eth = sources.find((s) => s.series === 'candles:ethereum')!;
    const btcS = sources.find((s) => s.series === 'candles:bitcoin')!;
    await btcS.fetch(AFTER, TODAY);
    const e = await rejects(eth.fetch(AFTER, TODAY, AbortSignal.timeout(300)));
    assert.equal(e.kind, 'budget');
  });

  test('the injected fetch is the one used; default hosts are the public ones', async () => {
    const seen: string[] = [];
    const counting: typeof fetch = (input, init) => {
      seen.push(String(input));
      return fetch(input, init);
    };
    await btc(srv.url, { fetch: counting }).fetch(AFTER, TODAY);
    assert.equal(seen.length, 1);
    assert.ok(seen[0]!.startsWith(`${srv.url}/api/v3/klines?symbol=BTCUSDT`));
    const hosts = new Map(createLiveSources().map((s) => [s.series, s.host]));
    assert.equal(hosts.get('candles:bitcoin'), 'data-api.binance.vision');
    assert.equal(hosts.get('candles:hyperliquid'), 'api.hyperliquid.xyz');
    assert.equal(hosts.get('fear_greed'), 'api.alternative.me');
    assert.equal(hosts.get('funding:bitcoin'), 'fapi.binance.com');
    assert.equal(hosts.get('metric:hype:dex_volume'), 'stats-data.hyperliquid.xyz');
  });

  test('Retry-After parsing: seconds and HTTP dates', () => {
    assert.equal(parseRetryAfter('2'), 2000);
    assert.equal(parseRetryAfter(null), undefined);
    assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:28:05 GMT', Date.parse('2015-10-21T07:28:00Z')), 5000);
    assert.equal(parseRetryAfter('soon'), undefined);
  });

  test('bad arguments and bad base URLs are refused', async () => {
    await assert.rejects(btc(srv.url).fetch('2026-03-11', '2026-03-11'), RangeError);
    await assert.rejects(btc(srv.url).fetch('2026-02-30', '2026-03-11'), RangeError);
    assert.throws(() => createLiveSources({ baseUrls: { okx: 'ftp://x' } }), /base URL of okx is not an http\(s\) URL/);
  });
});
