/**
 * The backtest metrics (src/engine/backtest.ts) on small series checked by hand.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  assetMetrics,
  buildSample,
  confidenceTable,
  hitRates,
  maxDrawdown,
  median,
  pooledMetrics,
  reversals,
  runLengths,
  sharpe,
  spearman,
  totalReturn,
  type SignalDay,
} from '../../src/engine/backtest.ts';
import type { SignalLevel } from '../../src/engine/types.ts';
import { addDays } from '../../src/engine/util.ts';

const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;
const days = (closes: number[], levels: SignalLevel[], start = '2024-01-01'): SignalDay[] =>
  closes.map((c, i) => ({ date: addDays(start, i), close: c, signal: levels[i]!, score: 0, confidence: 0.5 }));

describe('performance metrics', () => {
  it('Sharpe: mean over sample sd of daily returns x sqrt(365)', () => {
    // mean 0.02/3; deviations 1/300, -5/300, 4/300 -> variance (1 + 25 + 16) / 90000 / 2 = 42 / 180000
    const expected = (0.02 / 3 / Math.sqrt(42 / 180000)) * Math.sqrt(365);
    assert.ok(close(sharpe([0.01, -0.01, 0.02])!, expected));
    assert.ok(Math.abs(expected - 8.3381) < 1e-4);
    assert.equal(sharpe([0, 0, 0]), null, 'always flat: undefined');
    assert.equal(sharpe([0.01]), null);
  });
  it('max drawdown from the running peak of the compounded curve; total return compounds', () => {
    // equity 1.1, 0.55, 0.66, 0.99: the peak 1.1 falls to 0.55 (-50 %)
    assert.ok(close(maxDrawdown([0.1, -0.5, 0.2, 0.5]), -0.5));
    assert.equal(maxDrawdown([0.1, 0.2]), 0);
    assert.ok(close(totalReturn([0.1, -0.5, 0.2, 0.5]), 0.99 - 1));
  });
  it('Spearman: rank correlation with average ranks for ties', () => {
    assert.ok(close(spearman([1, 2, 3, 4], [10, 20, 30, 40])!, 1));
    assert.ok(close(spearman([1, 2, 3, 4], [4, 3, 2, 1])!, -1));
    assert.ok(close(spearman([1, 2, 3, 4], [1, 4, 9, 16])!, 1), 'monotone, not linear');
    // y ranks 1.5, 1.5, 3 against 1, 2, 3: 1.5 / sqrt(2 * 1.5)
    assert.ok(close(spearman([1, 2, 3], [1, 1, 2])!, 1.5 / Math.sqrt(3)));
    assert.equal(spearman([1, 2, 3], [5, 5, 5]), null);
  });
  it('runs, median and reversals within 3 days', () => {
    assert.deepEqual(runLengths(['a', 'a', 'b', 'b', 'b', 'a']), [2, 3, 1]);
    assert.equal(median([2, 3, 1]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([]), null);
    // a->b (undone the next day), b->a, a->c, c->d: 4 changes, 1 reversed
    assert.deepEqual(reversals(['a', 'b', 'a', 'a', 'c', 'c', 'c', 'c', 'd']), { changes: 4, reversed: 1 });
    // back 3 days after the change is within 3 days; 4 days after is not
    assert.deepEqual(reversals(['a', 'b', 'b', 'b', 'a']), { changes: 2, reversed: 1 });
    assert.deepEqual(reversals(['a', 'b', 'b', 'b', 'b', 'a']), { changes: 2, reversed: 0 });
    assert.deepEqual(reversals(['a', 'b', 'b', 'a']), { changes: 2, reversed: 1 });
  });
});

describe('strategy returns', () => {
  const d = days([100, 110, 99, 99, 90], ['buy', 'buy', 'neutral', 'sell', 'sell']);
  it('a position decided at the close of t earns t -> t+1, minus 10 bps per unit of change', () => {
    const s = buildSample(d, '2024-01-01', '2024-01-05', 10);
    assert.deepEqual(s.dates, ['2024-01-01', '2024-01-02', '2024-01-03', '2024-01-04']);
    assert.equal(s.gaps, 0, 'the last day has no next close yet: not a hole in the data');
    const want = {
      bh: [0.1, 99 / 110 - 1, 0, 90 / 99 - 1],
      longFlat: [0.1 - 0.001, 99 / 110 - 1, -0.001, 0],
      longShort: [0.1 - 0.001, 99 / 110 - 1, -0.001, -(90 / 99 - 1) - 0.001],
    };
    for (const k of ['bh', 'longFlat', 'longShort'] as const) {
      assert.equal(s[k].length, 4);
      s[k].forEach((x, i) => assert.ok(close(x, want[k][i]!), `${k}[${i}] ${x} vs ${want[k][i]}`));
    }
    assert.equal(s.tradesLF, 2);
    assert.equal(s.tradesLS, 3);
    assert.deepEqual(s.exposureLF, [1, 1, 0, 0]);
    assert.deepEqual(s.exposureLS, [1, 1, 0, 1]);
  });
  it('a flip long -> short costs two units', () => {
    const s = buildSample(days([100, 100, 100], ['buy', 'strong_sell', 'neutral']), '2024-01-01', '2024-01-03', 10);
    assert.ok(close(s.longShort[1]!, -0.002));
    assert.ok(close(s.longFlat[1]!, -0.001));
  });
  it('a missing next day earns nothing and is counted as a gap; the last day is not a gap', () => {
    const d2 = [...days([100, 110], ['buy', 'buy']), { date: '2024-01-04', close: 121, signal: 'buy' as const, score: 0, confidence: 0 }];
    const s = buildSample(d2, '2024-01-01', '2024-01-04', 0);
    assert.deepEqual(s.dates, ['2024-01-01']);
    assert.equal(s.gaps, 1, '2024-01-02 (no 2024-01-03) is a hole; 2024-01-04 is the end of the data');
  });
  it("an asset's metrics start at its first decision day when its data starts after the window", () => {
    const d = days([100, 110, 121], ['buy', 'buy', 'buy']);
    assert.equal(assetMetrics(d, '2023-06-01', '2024-01-03', 0).from, '2024-01-01');
    assert.equal(assetMetrics(d, '2024-01-02', '2024-01-03', 0).from, '2024-01-02');
    // Data on the window's first day whose next day is missing: the window still starts there.
    const holed = days([100, 110, 121, 130], ['buy', 'buy', 'buy', 'buy']).filter((x) => x.date !== '2024-01-02');
    assert.equal(assetMetrics(holed, '2024-01-01', '2024-01-04', 0).from, '2024-01-01');
  });
});

describe('hit rates, confidence and the pool', () => {
  it('buy edge = P(up | buy) - P(up), sell edge = P(down | sell) - P(down)', () => {
    const h = hitRates([
      { level: 'buy', ret: 0.1 },
      { level: 'strong_buy', ret: -0.1 },
      { level: 'sell', ret: -0.1 },
      { level: 'neutral', ret: 0.1 },
    ]);
    assert.equal(h.p_up_30d, 0.5);
    assert.equal(h.buy_edge_30d, 0); // 1/2 - 2/4
    assert.equal(h.sell_edge_30d, 0.5); // 1/1 - 2/4
    assert.equal(hitRates([{ level: 'neutral', ret: 1 }]).buy_edge_30d, null);
  });
  it('confidence bands count non-neutral days and their hits', () => {
    const t = confidenceTable([
      { level: 'buy', confidence: 0.1, ret: 0.1 },
      { level: 'sell', confidence: 0.2, ret: 0.1 },
      { level: 'neutral', confidence: 0.9, ret: 0.1 },
      { level: 'strong_sell', confidence: 1, ret: -0.1 },
    ]);
    assert.deepEqual(
      t.map((b) => [b.days, b.hit_rate]),
      [
        [2, 0.5],
        [0, null],
        [0, null],
        [1, 1],
      ],
    );
  });
  it('30-day forward returns and ICs; the pool averages the assets each day', () => {
    const n = 40;
    const up = days(
      Array.from({ length: n }, (_, i) => 100 + i),
      Array(n).fill('buy'),
    ).map((x, i) => ({ ...x, score: i / n }));
    const m = assetMetrics(up, '2024-01-01', addDays('2024-01-01', n - 1));
    assert.equal(m.hit_rates.days_30d, n - 30);
    assert.equal(m.hit_rates.p_up_30d, 1);
    assert.equal(m.hit_rates.buy_edge_30d, 0);
    assert.equal(m.levels.buy, 1);
    assert.equal(m.median_run_days, n);
    // The 7-day return falls as the price rises linearly: perfectly negative rank correlation with the rising score.
    assert.ok(close(m.ic_7d!, -1));
    const flat = days(Array(n).fill(100), Array(n).fill('neutral'));
    const p = pooledMetrics([up, flat], '2024-01-01', addDays('2024-01-01', n - 1), 0);
    assert.ok(close(p.buy_and_hold.total_return, totalReturn(up.slice(0, -1).map((x, i) => (up[i + 1]!.close / x.close - 1) / 2))));
    assert.ok(close(p.levels.buy, 0.5));
    assert.equal(p.hit_rates.days_30d, 2 * (n - 30));
  });
});
