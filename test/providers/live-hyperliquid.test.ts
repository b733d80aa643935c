import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLiveSources, UpstreamError, type LiveSourceOptions } from '../../src/providers/live/index.ts';
import { adapterContext } from '../../src/providers/live/index.ts';
import { hyperliquidFunding } from '../../src/providers/live/hyperliquid.ts';
import { fixture, fixtureJson, startFixtureServer, type Logged, type Reply } from '../helpers/fixture-server.ts';
import { startUpstream } from '../helpers/upstream.ts';

const dayMs = (d: string) => Date.parse(`${d}T00:00:00Z`);
const byId = (id: string, opts: LiveSourceOptions) => createLiveSources({ retryMinTimeoutMs: 10, ...opts }).find((s) => s.series === id)!;

describe('Hyperliquid /info (recorded responses)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  let route: (r: Logged) => Reply = () => ({ body: [] });
  before(async () => {
    srv = await startFixtureServer((r) => route(r));
  });
  after(() => srv.close());

  test('HYPE daily candles: exact values, the request body as documented', async () => {
    route = () => ({ body: fixture('hyperliquid/info_candleSnapshot_HYPE_1d.documented.json') });
    srv.log.length = 0;
    const got = await byId('candles:hyperliquid', { baseUrls: { hyperliquid: srv.url } }).fetch('2025-05-31', '2025-06-07');
    assert.equal(got.source, 'Hyperliquid /info candleSnapshot HYPE 1d (perp)');
    assert.deepStrictEqual(got.points[0], {
      date: '2025-06-01',
      open: 32.671,
      high: 34.279,
      low: 31.505,
      close: 34.152,
      volume: 3206031.45,
    });
    assert.equal(got.points.length, 6, '2025-06-07 is today: excluded');
    assert.equal(srv.log[0]!.method, 'POST');
    assert.deepStrictEqual(srv.log[0]!.body, {
      type: 'candleSnapshot',
      req: { coin: 'HYPE', interval: '1d', startTime: dayMs('2025-06-01'), endTime: dayMs('2025-06-07') - 1 },
    });
  });

  test('hourly candles (the real kPEPE 1h response) are refused as a format change naming the field', async () => {
    route = () => ({ body: fixture('hyperliquid/info_candleSnapshot_kPEPE_1h.json') });
    await assert.rejects(
      byId('candles:hyperliquid', { baseUrls: { hyperliquid: srv.url } }).fetch('2023-05-01', '2023-06-01'),
      (e: unknown) => {
        assert.ok(e instanceof UpstreamError && e.kind === 'format');
        assert.match(
          e.message,
          /^Hyperliquid \/info candleSnapshot HYPE 1d \(perp\): \/info: unexpected response format at field \[0\]\.t/,
        );
        return true;
      },
    );
  });

  test('changed field and empty page', async () => {
    const bad = fixtureJson<Record<string, unknown>[]>('hyperliquid/info_candleSnapshot_HYPE_1d.documented.json');
    delete bad[2]!.c;
    route = () => ({ body: bad });
    await assert.rejects(
      byId('candles:hyperliquid', { baseUrls: { hyperliquid: srv.url } }).fetch('2025-05-31', '2025-06-07'),
      /field \[2\]\.c: /,
    );
    route = () => ({ body: [] });
    assert.deepStrictEqual(
      (await byId('candles:hyperliquid', { baseUrls: { hyperliquid: srv.url } }).fetch('2025-05-31', '2025-06-07')).points,
      [],
    );
  });

  test('funding (the real BTC fundingHistory response): 8-hourly until 2023-06-08, then hourly × 8; daily means; prints counted', async () => {
    const raw = fixtureJson<{ fundingRate: string; time: number }[]>('hyperliquid/info_fundingHistory_BTC.json');
    route = (r) => {
      const b = r.body as { startTime: number; endTime: number };
      return { body: raw.filter((x) => x.time >= b.startTime && x.time <= b.endTime).slice(0, 500) };
    };
    srv.log.length = 0;
    const s = hyperliquidFunding(adapterContext({ baseUrls: { hyperliquid: srv.url } }), 'bitcoin', 'BTC');
    const got = await s.fetch('2023-05-11', '2023-07-17');
    if (got.kind !== 'funding') assert.fail();
    assert.ok(srv.log.length >= 3, `paginated: ${srv.log.length} requests`);
    assert.deepStrictEqual(srv.log[0]!.body, {
      type: 'fundingHistory',
      coin: 'BTC',
      startTime: dayMs('2023-05-12'),
      endTime: dayMs('2023-07-17') - 1,
    });
    const day = (d: string) => got.points.find((p) => p.date === d)!;
    assert.deepStrictEqual(day('2023-05-12'), {
      date: '2023-05-12',
      rate: -0.00061334 + (-0.00074503 - -0.00061334 + (-0.00081798 - -0.00061334)) / 3,
      interval_hours: 8,
      prints: 3,
    });
    const prints = (d: string) => raw.filter((x) => new Date(x.time).toISOString().startsWith(d)).map((x) => Number(x.fundingRate));
    const june10 = prints('2023-06-10');
    assert.equal(june10.length, 24);
    assert.equal(day('2023-06-10').prints, 24);
    assert.equal(day('2023-06-10').interval_hours, 1);
    assert.ok(Math.abs(day('2023-06-10').rate - (june10.reduce((a, b) => a + b, 0) * 8) / 24) < 1e-18);
    assert.equal(day('2023-07-02').prints, 23, 'the missing 20:00 print is reported, not filled');
    assert.equal(day('2023-06-08').interval_hours, 1);
    assert.equal(
      got.points.length,
      new Set(raw.map((x) => new Date(x.time).toISOString().slice(0, 10))).size - 1,
      'all days but today (2023-07-17)',
    );
  });

  test('funding: one print time with two different rates is refused, never a choice', async () => {
    const raw = fixtureJson<Record<string, unknown>[]>('hyperliquid/info_fundingHistory_BTC_with_endTime.json');
    const s = () =>
      hyperliquidFunding(adapterContext({ baseUrls: { hyperliquid: srv.url } }), 'bitcoin', 'BTC').fetch('2023-05-11', '2023-06-01');
    route = () => ({ body: [...raw, { ...raw[1]! }] });
    const same = await s();
    route = () => ({ body: raw });
    assert.deepStrictEqual(same, await s(), 'a repeated print is counted once');
    route = () => ({ body: [...raw, { ...raw[1]!, fundingRate: '0.0123' }] });
    await assert.rejects(s(), (e: unknown) => {
      assert.ok(e instanceof UpstreamError && e.kind === 'format', String(e));
      assert.match(
        e.message,
        new RegExp(`field \\[${raw.length}\\]\\.fundingRate: two different rates for ${new Date(raw[1]!.time as number).toISOString()}`),
      );
      return true;
    });
  });

  test('funding: a changed field names it', async () => {
    const bad = fixtureJson<Record<string, unknown>[]>('hyperliquid/info_fundingHistory_BTC_with_endTime.json');
    bad[1]!.fundingRate = 'n/a';
    route = () => ({ body: bad });
    await assert.rejects(
      hyperliquidFunding(adapterContext({ baseUrls: { hyperliquid: srv.url } }), 'bitcoin', 'BTC').fetch('2023-05-11', '2023-06-01'),
      /^UpstreamError: Hyperliquid \/info fundingHistory BTC .*field \[1\]\.fundingRate/,
    );
  });
});

describe('Hyperliquid funding pagination and normalisation against the fake upstream', () => {
  test('hourly prints of rate/8 give back the daily mean exactly; 500-print pages are followed', async () => {
    const up = await startUpstream();
    try {
      up.setToday('2025-06-15');
      const s = hyperliquidFunding(adapterContext({ baseUrls: up.baseUrls }), 'bitcoin', 'BTC');
      const got = await s.fetch('2025-05-01', '2025-06-15');
      if (got.kind !== 'funding') assert.fail();
      assert.equal(got.points.length, 44);
      assert.ok(up.requestsBy.hyperliquid >= Math.ceil((44 * 24) / 500));
      assert.deepStrictEqual(
        got.points.find((p) => p.date === '2025-06-02'),
        { date: '2025-06-02', rate: 3.13933333333333e-5, interval_hours: 1, prints: 24 },
      );
      const hype = await createLiveSources({ baseUrls: up.baseUrls })
        .find((x) => x.series === 'funding:hyperliquid')!
        .fetch('2025-05-01', '2025-06-15');
      assert.deepStrictEqual(hype.points, [], 'no bundled HYPE funding: nothing served, nothing invented');
    } finally {
      await up.close();
    }
  });
});

describe('Hyperliquid stats feed (real recorded responses)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    srv = await startFixtureServer((r) => {
      const m = /^\/Mainnet\/(\w+)$/.exec(r.url.pathname);
      return m ? { body: fixture(`hyperliquid/stats_${m[1]}.json`) } : { status: 404 };
    });
  });
  after(() => srv.close());

  const cases: [string, string, string][] = [
    ['metric:hype:dex_volume', 'daily_usd_volume', 'daily_usd_volume'],
    ['metric:hype:active_addresses', 'daily_unique_users', 'daily_unique_users'],
    ['metric:hype:net_inflow_usd', 'daily_inflow', 'inflow'],
  ];
  for (const [id, file, field] of cases) {
    test(`${id}: exact values of stats_${file}.json`, async () => {
      const raw = fixtureJson<{ chart_data: Record<string, number | string>[] }>(`hyperliquid/stats_${file}.json`).chart_data;
      const got = await byId(id, { baseUrls: { hyperliquidStats: srv.url } }).fetch('2023-06-12', '2023-07-01');
      const want = raw
        .filter((r) => (r.time as string) > '2023-06-13' && (r.time as string) < '2023-07-01')
        .map((r) => ({ date: (r.time as string).slice(0, 10), value: r[field] }));
      assert.ok(want.length > 10);
      assert.deepStrictEqual(got.points, [{ date: '2023-06-13', value: raw[0]![field] }, ...want.filter((w) => w.date !== '2023-06-13')]);
      assert.equal(srv.log.at(-1)!.url.pathname, `/Mainnet/${file}`);
    });
  }

  test('a negative volume is a format error naming the day; a negative net inflow is a value', async () => {
    srv.script({ body: { chart_data: [{ time: '2023-06-13T00:00:00', daily_usd_volume: -5 }] } });
    await assert.rejects(
      byId('metric:hype:dex_volume', { baseUrls: { hyperliquidStats: srv.url } }).fetch('2023-06-12', '2023-07-01'),
      /^UpstreamError: Hyperliquid stats \/Mainnet\/daily_usd_volume \(USD, perp-dominated\): unexpected value for 2023-06-13: -5 \(dex_volume cannot be negative\)$/,
    );
    srv.script({ body: { chart_data: [{ time: '2023-06-13T00:00:00', inflow: -5 }] } });
    assert.deepStrictEqual(
      (await byId('metric:hype:net_inflow_usd', { baseUrls: { hyperliquidStats: srv.url } }).fetch('2023-06-12', '2023-07-01')).points,
      [{ date: '2023-06-13', value: -5 }],
    );
  });

  test('a changed field, a date that is no day of the calendar and an empty chart', async () => {
    srv.script({ body: { chart_data: [{ time: '2023-06-13T00:00:00', volume: 5 }] } });
    await assert.rejects(
      byId('metric:hype:dex_volume', { baseUrls: { hyperliquidStats: srv.url } }).fetch('2023-06-12', '2023-07-01'),
      /\/Mainnet\/daily_usd_volume: unexpected response format at field chart_data\[0\]\.daily_usd_volume/,
    );
    srv.script({ body: { chart_data: [{ time: '2023-02-29T00:00:00', daily_usd_volume: 5 }] } });
    await assert.rejects(
      byId('metric:hype:dex_volume', { baseUrls: { hyperliquidStats: srv.url } }).fetch('2023-01-12', '2023-07-01'),
      /\/Mainnet\/daily_usd_volume: unexpected response format at field chart_data\[0\]\.time: not a day of the calendar/,
      'a date that is no day of the calendar',
    );
    srv.script({ body: { chart_data: [] } });
    assert.deepStrictEqual(
      (await byId('metric:hype:dex_volume', { baseUrls: { hyperliquidStats: srv.url } }).fetch('2023-06-12', '2023-07-01')).points,
      [],
    );
  });
});
