import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { addDays } from '../../src/engine/util.ts';
import type { MarketData } from '../../src/providers/port.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { createLiveSources, DOCUMENTED_GAPS, type LiveSource, type SeriesPoints } from '../../src/providers/live/index.ts';
import { CHAIN_HEALTH_METRICS } from '../../src/engine/chain-health.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** The bundled dataset's points of one series, dated in (from, to]. */
function expected(data: MarketData, s: LiveSource, from: string, to: string): { date: string }[] {
  const inWindow = <T extends { date: string }>(xs: T[]) => xs.filter((x) => x.date > from && x.date <= to);
  if (s.kind === 'candles') return inWindow(data.candles.get(s.asset!) ?? []);
  if (s.kind === 'fear_greed') return inWindow(data.fearGreed);
  if (s.kind === 'funding') return inWindow(data.funding.get(s.asset!) ?? []);
  return inWindow(data.chains.get(s.chain!)?.[s.metric!]?.points ?? []);
}

/** The comparable part of fetched points (funding: date and rate; the rest as is). */
function comparable(got: SeriesPoints): { date: string }[] {
  if (got.kind === 'funding') return got.points.map((p) => ({ date: p.date, rate: p.rate }));
  return got.points;
}

/** Fetches a series; the Solana source is polled every 6 h of the fake's clock from `from` to `today` first. */
async function fetchSeries(up: Upstream, s: LiveSource, from: string, today: string): Promise<SeriesPoints> {
  if (s.series === 'metric:sol:transactions') {
    let got: SeriesPoints | undefined;
    for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${today}T00:00:00Z`); t += 6 * 3_600_000) {
      up.setNow(t);
      got = await s.fetch(from, today);
    }
    return got!;
  }
  return s.fetch(from, today);
}

describe('live sources against the fake upstream equal the bundled dataset', () => {
  let up: Upstream;
  let data: MarketData;
  before(async () => {
    up = await startUpstream();
    data = await new DatasetProvider(path.join(ROOT_DIR, 'data')).load();
  });
  after(() => up.close());

  test('every series the engine uses has an adapter or a documented gap', () => {
    const sources = createLiveSources({ baseUrls: up.baseUrls });
    const ids = new Set(sources.map((s) => s.series));
    assert.equal(ids.size, sources.length, 'series ids are unique');
    for (const a of data.assets) assert.ok(ids.has(`candles:${a.asset}`), a.asset);
    for (const asset of data.funding.keys()) assert.ok(ids.has(`funding:${asset}`), asset);
    assert.ok(ids.has('fear_greed'));
    const gaps = new Set(DOCUMENTED_GAPS.map((g) => g.series));
    for (const [chain, metrics] of Object.entries(CHAIN_HEALTH_METRICS)) {
      for (const { metric } of metrics) {
        const id = `metric:${chain}:${metric}`;
        assert.ok(ids.has(id) !== gaps.has(id), `${id}: exactly one of adapter / documented gap`);
      }
    }
  });

  test('after=2025-06-01, today=2025-06-15: exactly the dataset points of 2025-06-02..2025-06-14', async () => {
    up.setToday('2025-06-15');
    const sources = createLiveSources({ baseUrls: up.baseUrls, hostBudgetPerMinute: 1000, retries: 0 });
    let nonEmpty = 0;
    for (const s of sources) {
      const got = await fetchSeries(up, s, '2025-06-01', '2025-06-15');
      assert.equal(got.kind, s.kind);
      assert.equal(got.source, s.source, `${s.series}: no fallback used`);
      const want = expected(data, s, '2025-06-01', '2025-06-14');
      assert.deepStrictEqual(comparable(got), want, s.series);
      if (got.kind === 'funding')
        for (const p of got.points) assert.deepStrictEqual([p.interval_hours, p.prints], s.asset === 'hyperliquid' ? [1, 24] : [8, 3]);
      if (want.length) nonEmpty++;
    }
    // candles x11, fear & greed, funding x3, eth/sol/hype TVL, sol transactions, eth transactions
    assert.ok(nonEmpty >= 18, `${nonEmpty} series have data in the window`);
  });

  test('each series over the last 14 days of its bundled data (today = the day after its last point)', async () => {
    for (const s of createLiveSources({ baseUrls: up.baseUrls, hostBudgetPerMinute: 1000, retries: 0 })) {
      const all = expected(data, s, '0000-01-01', '9999-12-31');
      if (all.length === 0) {
        assert.ok(s.series === 'funding:hyperliquid', `${s.series} has bundled data`);
        continue;
      }
      const last = all.at(-1)!.date;
      const today = addDays(last, 1);
      const from = addDays(last, -14);
      up.setToday(today);
      const got = await fetchSeries(up, s, from, today);
      const want = expected(data, s, from, last);
      assert.ok(want.length > 0, s.series);
      assert.deepStrictEqual(comparable(got), want, s.series);
    }
  });

  test('a day that is cut (today) is never returned, and the cut moves with setToday', async () => {
    const [btc] = createLiveSources({ baseUrls: up.baseUrls });
    up.setToday('2025-06-10');
    const a = await btc!.fetch('2025-06-01', '2025-06-15');
    assert.equal(a.points.at(-1)!.date, '2025-06-09');
    up.setToday('2025-06-12');
    const b = await btc!.fetch('2025-06-01', '2025-06-11');
    assert.equal(b.points.at(-1)!.date, '2025-06-10', 'today (2025-06-11) is excluded even when the upstream has it');
  });
});
