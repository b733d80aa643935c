import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLiveSources, UpstreamError } from '../../src/providers/live/index.ts';
import { fixture, fixtureJson, startFixtureServer } from '../helpers/fixture-server.ts';

const day = (s: number) => new Date(s * 1000).toISOString().slice(0, 10);

describe('DefiLlama (recorded responses)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    srv = await startFixtureServer((r) => {
      const p = r.url.pathname;
      if (p === '/v2/historicalChainTvl/Ethereum' || p === '/v2/historicalChainTvl/Solana')
        return { body: fixture('defillama/v2_historicalChainTvl_Ethereum.reconstructed.json') };
      if (p === '/protocol/hyperliquid') return { body: fixture('defillama/protocol_hyperliquid.documented.json') };
      if (p === '/summary/fees/hyperliquid' && r.url.searchParams.get('dataType') === 'dailyFees')
        return { body: fixture('defillama/summary_fees_hyperliquid.json') };
      return { status: 404, body: { message: 'not found' } };
    });
  });
  after(() => srv.close());
  const src = (id: string) => createLiveSources({ baseUrls: { defillama: srv.url }, retryMinTimeoutMs: 10 }).find((s) => s.series === id)!;

  test('chain TVL: exact values, ascending, complete days only', async () => {
    const raw = fixtureJson<{ date: number; tvl: number }[]>('defillama/v2_historicalChainTvl_Ethereum.reconstructed.json');
    const got = await src('metric:eth:tvl').fetch('2025-05-01', '2025-08-02');
    assert.equal(got.source, 'DefiLlama chain TVL /v2/historicalChainTvl/Ethereum (USD)');
    assert.deepStrictEqual(
      got.points,
      raw.filter((r) => day(r.date) < '2025-08-02').map((r) => ({ date: day(r.date), value: r.tvl })),
    );
    assert.deepStrictEqual(got.points[0], { date: '2025-05-05', value: 50167098897 });
    assert.equal(srv.log.at(-1)!.url.pathname, '/v2/historicalChainTvl/Ethereum');
    await src('metric:sol:tvl').fetch('2025-05-01', '2025-08-02');
    assert.equal(srv.log.at(-1)!.url.pathname, '/v2/historicalChainTvl/Solana');
  });

  test('a point not stamped 00:00 UTC (a live snapshot) is skipped, not taken for a day', async () => {
    srv.script({
      body: [
        { date: 1746403200, tvl: 1 },
        { date: 1746403200 + 86_400 + 3600, tvl: 2 },
      ],
    });
    assert.deepStrictEqual((await src('metric:eth:tvl').fetch('2025-05-01', '2025-08-02')).points, [{ date: '2025-05-05', value: 1 }]);
  });

  test('a negative TVL is a format error naming the day and the value: nothing of that fetch is kept', async () => {
    srv.script({
      body: [
        { date: 1746403200, tvl: 1 },
        { date: 1746403200 + 86_400, tvl: -5 },
      ],
    });
    await assert.rejects(src('metric:eth:tvl').fetch('2025-05-01', '2025-08-02'), (e: unknown) => {
      assert.ok(e instanceof UpstreamError);
      assert.equal(e.kind, 'format');
      assert.equal(
        e.message,
        'DefiLlama chain TVL /v2/historicalChainTvl/Ethereum (USD): unexpected value for 2025-05-06: -5 (tvl cannot be negative)',
      );
      return true;
    });
  });

  test('protocol TVL (tvl[].totalLiquidityUSD) of hyperliquid', async () => {
    const got = await src('metric:hype:tvl_protocol_defillama').fetch('2025-05-31', '2025-06-10');
    assert.equal(got.points.length, 9);
    assert.deepStrictEqual(got.points[0], { date: '2025-06-01', value: 3520953950 });
    assert.deepStrictEqual(got.points[1], { date: '2025-06-02', value: 3520579810 });
  });

  test('daily fees (the real /summary/fees/hyperliquid response): the partial last day is excluded by today', async () => {
    const raw = fixtureJson<{ totalDataChart: [number, number][] }>('defillama/summary_fees_hyperliquid.json').totalDataChart;
    const got = await src('metric:hype:fees').fetch('2024-01-01', '2025-05-05');
    assert.deepStrictEqual(got.points[0], { date: '2024-12-23', value: 1472923 });
    assert.equal(got.points.length, raw.length - 1);
    assert.deepStrictEqual(got.points.at(-1), { date: '2025-05-04', value: 817513 });
  });

  test('changed fields are named; empty responses are no points', async () => {
    srv.script({ body: [{ date: 1746403200, totalLiquidityUSD: 5 }] });
    await assert.rejects(
      src('metric:eth:tvl').fetch('2025-05-01', '2025-08-02'),
      /DefiLlama chain TVL .*: \/v2\/historicalChainTvl\/Ethereum: unexpected response format at field \[0\]\.tvl/,
    );
    srv.script({ body: { totalDataChart: [[1734912000, '1472923']] } });
    await assert.rejects(src('metric:hype:fees').fetch('2024-01-01', '2025-05-05'), /field totalDataChart\[0\]\[1\]/);
    srv.script({ body: { name: 'Hyperliquid' } });
    await assert.rejects(src('metric:hype:tvl_protocol_defillama').fetch('2025-05-31', '2025-06-10'), /field tvl: /);
    srv.script({ body: [] });
    assert.deepStrictEqual((await src('metric:eth:tvl').fetch('2025-05-01', '2025-08-02')).points, []);
  });
});
