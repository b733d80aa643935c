import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { createLiveSources, UpstreamError, type LiveSource, type LiveSourceOptions } from '../../src/providers/live/index.ts';
import { fixture, fixtureJson, startFixtureServer } from '../helpers/fixture-server.ts';
import { startUpstream } from '../helpers/upstream.ts';

const KLINES = 'binance/api_v3_klines_BTCUSDT_1d.reconstructed.json';
const dayMs = (d: string) => Date.parse(`${d}T00:00:00Z`);

function series(id: string, opts: LiveSourceOptions): LiveSource {
  return createLiveSources({ retryMinTimeoutMs: 10, ...opts }).find((s) => s.series === id)!;
}

async function formatError(p: Promise<unknown>): Promise<UpstreamError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof UpstreamError && e.kind === 'format', String(e));
    return e;
  }
  assert.fail('expected a format error');
}

describe('Binance spot klines (recorded response)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    srv = await startFixtureServer(() => ({ body: fixture(KLINES) }));
  });
  after(() => srv.close());
  const btc = () => series('candles:bitcoin', { baseUrls: { binance: srv.url } });

  test('normal parse: exact values, the request asked for complete days from after+1', async () => {
    srv.log.length = 0;
    const got = await btc().fetch('2026-02-24', '2026-03-11');
    assert.equal(got.kind, 'candles');
    assert.equal(got.source, 'Binance spot /api/v3/klines BTCUSDT 1d');
    assert.equal(got.points.length, 14);
    assert.deepStrictEqual(got.points[0], {
      date: '2026-02-25',
      open: 64058.15,
      high: 69988.83,
      low: 63913.27,
      close: 67988.04,
      volume: 30749.99259,
    });
    assert.deepStrictEqual(got.points[1], {
      date: '2026-02-26',
      open: 67988.04,
      high: 68860.0,
      low: 66500.0,
      close: 67485.18,
      volume: 20737.77792,
    });
    const raw = fixtureJson<unknown[][]>(KLINES);
    assert.deepStrictEqual(
      got.points.map((p) => p.close),
      raw.map((r) => Number(r[4])),
    );
    const q = srv.log[0]!.url.searchParams;
    assert.equal(srv.log[0]!.url.pathname, '/api/v3/klines');
    assert.deepStrictEqual(
      [q.get('symbol'), q.get('interval'), q.get('startTime'), q.get('endTime'), q.get('limit')],
      ['BTCUSDT', '1d', String(dayMs('2026-02-25')), String(dayMs('2026-03-11') - 1), '1000'],
    );
  });

  test('only complete days strictly between after and today', async () => {
    const got = await btc().fetch('2026-02-27', '2026-03-05');
    assert.deepStrictEqual(
      got.points.map((p) => p.date),
      ['2026-02-28', '2026-03-01', '2026-03-02', '2026-03-03', '2026-03-04'],
    );
  });

  test('a candle still open (closeTime in the future) is never returned', async () => {
    const open = dayMs(new Date().toISOString().slice(0, 10));
    srv.script({ body: [[open, '1', '2', '0.5', '1.5', '10', open + 86_399_999, '15', 3, '0', '0', '0']] });
    const got = await btc().fetch('2026-01-01', '2099-01-01');
    assert.deepStrictEqual(got.points, []);
  });

  test('an empty page is no points', async () => {
    srv.script({ body: [] });
    assert.deepStrictEqual((await btc().fetch('2026-02-24', '2026-03-11')).points, []);
  });

  test('a changed field names the source, the path and the field', async () => {
    const raw = fixtureJson<unknown[][]>(KLINES);
    raw[3]![4] = 67485.18; // close sent as a number
    srv.script({ body: raw });
    const e = await formatError(btc().fetch('2026-02-24', '2026-03-11'));
    assert.equal(e.source, 'Binance spot /api/v3/klines BTCUSDT 1d');
    assert.match(e.message, /^Binance spot \/api\/v3\/klines BTCUSDT 1d: \/api\/v3\/klines\?symbol=BTCUSDT.*field \[3\]\[4\]/);
    const bad = fixtureJson<unknown[][]>(KLINES);
    bad[0]![0] = 1771977600000 + 3_600_000; // not a UTC day
    srv.script({ body: bad });
    assert.match((await formatError(btc().fetch('2026-02-24', '2026-03-11'))).message, /field \[0\]\[0\]: .* is not 00:00 UTC/);
    const incoherent = fixtureJson<unknown[][]>(KLINES);
    incoherent[5]![3] = '99999999'; // low above high
    srv.script({ body: incoherent });
    assert.match((await formatError(btc().fetch('2026-02-24', '2026-03-11'))).message, /field \[5\]: incoherent candle for 2026-03-02/);
    srv.script({ body: { code: -1, msg: 'moved' } });
    assert.match((await formatError(btc().fetch('2026-02-24', '2026-03-11'))).message, /field \(root\)/);
  });

  test('two different candles for one day are refused, identical ones are merged', async () => {
    const raw = fixtureJson<unknown[][]>(KLINES);
    srv.script({ body: [...raw, raw[0]] });
    assert.equal((await btc().fetch('2026-02-24', '2026-03-11')).points.length, 14);
    const changed = [...raw, [...raw[0]!]];
    changed.at(-1)![5] = '1.0'; // another volume for the same day
    srv.script({ body: changed });
    assert.match((await formatError(btc().fetch('2026-02-24', '2026-03-11'))).message, /two different values for 2026-02-25/);
  });
});

describe('Binance 451/403 → OKX fallback (recorded OKX layout)', () => {
  let binance: Awaited<ReturnType<typeof startFixtureServer>>;
  let okx: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    binance = await startFixtureServer(() => ({ status: 451, body: { code: 0, msg: 'Service unavailable from a restricted location' } }));
    okx = await startFixtureServer((r) =>
      Number(r.url.searchParams.get('after')) <= dayMs('2025-06-01')
        ? { body: { code: '0', msg: '', data: [] } }
        : { body: fixture('okx/api_v5_market_history-candles_BTC-USDT_1Dutc.documented.json') },
    );
  });
  after(async () => {
    await binance.close();
    await okx.close();
  });

  test('451: the candles come from OKX, labelled with OKX, exact values', async () => {
    okx.log.length = 0;
    const s = series('candles:bitcoin', { baseUrls: { binance: binance.url, okx: okx.url } });
    const got = await s.fetch('2025-05-31', '2025-06-11');
    assert.match(got.source, /^OKX spot \/api\/v5\/market\/history-candles BTC-USDT 1Dutc/);
    assert.equal(got.points.length, 10);
    assert.deepStrictEqual(got.points[0], {
      date: '2025-06-01',
      open: 104591.88,
      high: 105866.91,
      low: 103752.49,
      close: 105642.93,
      volume: 9709.70006,
    });
    assert.equal(got.points.at(-1)!.date, '2025-06-10');
    const q = okx.log[0]!.url.searchParams;
    assert.deepStrictEqual(
      [q.get('instId'), q.get('bar'), q.get('after'), q.get('limit')],
      ['BTC-USDT', '1Dutc', String(dayMs('2025-06-11')), '100'],
    );
    assert.equal(binance.log.at(-1)!.url.pathname, '/api/v3/klines');
  });

  test('403 also falls back; unconfirmed OKX candles are dropped; an OKX error code is an error', async () => {
    binance.script({ status: 403 });
    const body = fixtureJson<{ data: string[][] }>('okx/api_v5_market_history-candles_BTC-USDT_1Dutc.documented.json');
    body.data[0]![8] = '0';
    okx.script({ body });
    const s = series('candles:bitcoin', { baseUrls: { binance: binance.url, okx: okx.url } });
    const got = await s.fetch('2025-05-31', '2025-06-11');
    assert.equal(got.points.at(-1)!.date, '2025-06-09');
    okx.script({ body: { code: '51001', msg: "Instrument ID doesn't exist.", data: [] } });
    await assert.rejects(s.fetch('2025-05-31', '2025-06-11'), /OKX error 51001/);
  });

  test('a 400 from Binance does not fall back', async () => {
    okx.log.length = 0;
    binance.script({ status: 400 });
    const s = series('candles:bitcoin', { baseUrls: { binance: binance.url, okx: okx.url } });
    await assert.rejects(s.fetch('2025-05-31', '2025-06-11'), (e: unknown) => e instanceof UpstreamError && e.status === 400);
    assert.equal(okx.log.length, 0);
  });
});

describe('pagination against the fake upstream', () => {
  test('Binance klines: 1000 per page; OKX: 100 per page, newest first; funding: 1000 prints per page; all equal the dataset', async () => {
    const up = await startUpstream();
    try {
      up.setToday('2025-06-15');
      const data = await new DatasetProvider(path.join(ROOT_DIR, 'data')).load('2025-06-14');
      const want = data.candles.get('bitcoin')!;
      const s = createLiveSources({ baseUrls: up.baseUrls }).find((x) => x.series === 'candles:bitcoin')!;
      const got = await s.fetch('2018-01-01', '2025-06-15');
      assert.equal(up.requestsBy.binance, Math.ceil(want.length / 1000));
      assert.deepStrictEqual(got.points, want);
      up.fault('binance', { kind: 'status', status: 451 });
      const viaOkx = await createLiveSources({ baseUrls: up.baseUrls })
        .find((x) => x.series === 'candles:bitcoin')!
        .fetch('2024-12-31', '2025-06-15');
      const tail = want.filter((c) => c.date > '2024-12-31');
      assert.deepStrictEqual(viaOkx.points, tail);
      assert.equal(up.requestsBy.okx, Math.ceil(tail.length / 100) + (tail.length % 100 === 0 ? 1 : 0));
      const funding = await createLiveSources({ baseUrls: up.baseUrls })
        .find((x) => x.series === 'funding:bitcoin')!
        .fetch('2023-12-31', '2025-06-15');
      const wantFunding = data.funding.get('bitcoin')!.filter((f) => f.date > '2023-12-31');
      assert.deepStrictEqual(
        funding.points.map((p) => ({ date: p.date, rate: 'rate' in p ? p.rate : NaN })),
        wantFunding,
      );
      assert.equal(up.requestsBy.binanceFutures, 1 + Math.ceil((wantFunding.length * 3) / 1000), 'fundingInfo + 1000-print pages');
    } finally {
      await up.close();
    }
  });
});

describe('Binance USD-M funding (recorded responses)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  let info: unknown = fixtureJson('binance/fapi_v1_fundingInfo.documented.json');
  before(async () => {
    srv = await startFixtureServer((r) =>
      r.url.pathname === '/fapi/v1/fundingInfo'
        ? { body: info }
        : { body: fixture('binance/fapi_v1_fundingRate_BTCUSDT.reconstructed.json') },
    );
  });
  after(() => srv.close());
  const raw = fixtureJson<{ fundingTime: number; fundingRate: string }[]>('binance/fapi_v1_fundingRate_BTCUSDT.reconstructed.json');
  /** Plain daily means of the recorded prints (×factor), for comparison. */
  const plainMeans = (factor: number) => {
    const by = new Map<string, number[]>();
    for (const r of raw) {
      const d = new Date(r.fundingTime).toISOString().slice(0, 10);
      by.set(d, [...(by.get(d) ?? []), Number(r.fundingRate) * factor]);
    }
    return [...by].map(([date, xs]) => ({ date, mean: xs.reduce((a, b) => a + b, 0) / xs.length, n: xs.length }));
  };

  test('daily means of the 8-hour prints, interval 8 (symbol not in fundingInfo), prints counted', async () => {
    srv.log.length = 0;
    const got = await series('funding:bitcoin', { baseUrls: { binanceFutures: srv.url } }).fetch('2026-09-28', '2026-10-04');
    assert.equal(got.kind, 'funding');
    if (got.kind !== 'funding') return;
    const want = plainMeans(1);
    assert.deepStrictEqual(
      got.points.map((p) => [p.date, p.prints, p.interval_hours]),
      want.map((w) => [w.date, w.n, 8]),
    );
    for (const [i, p] of got.points.entries())
      assert.ok(Math.abs(p.rate - want[i]!.mean) < 1e-18, `${p.date}: ${p.rate} vs ${want[i]!.mean}`);
    assert.equal(got.points[0]!.prints, 1, 'a day with one print is still a day, and says so');
    assert.equal(got.points[1]!.rate, (0.00007697 + Number(raw[2]!.fundingRate) + Number(raw[3]!.fundingRate)) / 3);
    const q = srv.log.find((l) => l.url.pathname === '/fapi/v1/fundingRate')!.url.searchParams;
    assert.deepStrictEqual([q.get('symbol'), q.get('startTime'), q.get('limit')], ['BTCUSDT', String(dayMs('2026-09-29')), '1000']);
  });

  test('a 4-hour symbol (fundingInfo) is normalised to per 8 hours (× 2)', async () => {
    info = [
      { symbol: 'BTCUSDT', adjustedFundingRateCap: '0.02', adjustedFundingRateFloor: '-0.02', fundingIntervalHours: 4, disclaimer: false },
    ];
    try {
      const got = await series('funding:bitcoin', { baseUrls: { binanceFutures: srv.url } }).fetch('2026-09-28', '2026-10-04');
      if (got.kind !== 'funding') assert.fail();
      const want = plainMeans(2);
      for (const [i, p] of got.points.entries()) {
        assert.equal(p.interval_hours, 4);
        assert.ok(Math.abs(p.rate - want[i]!.mean) < 1e-18);
      }
    } finally {
      info = fixtureJson('binance/fapi_v1_fundingInfo.documented.json');
    }
  });

  test('a print repeated with the same rate is counted once; one time with two different rates is refused', async () => {
    const raw2 = fixtureJson<Record<string, unknown>[]>('binance/fapi_v1_fundingRate_BTCUSDT.reconstructed.json');
    const s = () => series('funding:bitcoin', { baseUrls: { binanceFutures: srv.url } }).fetch('2026-09-28', '2026-10-04');
    srv.script({ body: info }, { body: [...raw2, { ...raw2[2]! }] });
    const same = await s();
    if (same.kind !== 'funding') assert.fail();
    assert.deepStrictEqual(
      same.points.map((p) => p.prints),
      plainMeans(1).map((w) => w.n),
    );
    srv.script({ body: info }, { body: [...raw2, { ...raw2[2]!, fundingRate: '0.00099999' }] });
    const e = await formatError(s());
    assert.match(
      e.message,
      new RegExp(
        `field \\[${raw2.length}\\]\\.fundingRate: two different rates for ${new Date(raw2[2]!.fundingTime as number).toISOString()}`,
      ),
    );
  });

  test('a changed field names it; an empty page is no days', async () => {
    const bad = fixtureJson<Record<string, unknown>[]>('binance/fapi_v1_fundingRate_BTCUSDT.reconstructed.json');
    bad[5]!.fundingRate = null;
    srv.script({ body: info }, { body: bad });
    const e = await formatError(series('funding:bitcoin', { baseUrls: { binanceFutures: srv.url } }).fetch('2026-09-28', '2026-10-04'));
    assert.match(
      e.message,
      /^Binance USD-M \/fapi\/v1\/fundingRate BTCUSDT .*: \/fapi\/v1\/fundingRate\?symbol=BTCUSDT.* field \[5\]\.fundingRate/,
    );
    srv.script({ body: info }, { body: [] });
    assert.deepStrictEqual(
      (await series('funding:bitcoin', { baseUrls: { binanceFutures: srv.url } }).fetch('2026-09-28', '2026-10-04')).points,
      [],
    );
  });
});
