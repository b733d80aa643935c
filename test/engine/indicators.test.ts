import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ema, pctChange, returnOverCalendarDays, rsiWilder, sma } from '../../src/engine/indicators.ts';
import { loadCandles } from './real-data.ts';

/** Wilder's RSI written out directly (independent of trading-signals). */
function refRsi(closes: number[], n: number): (number | null)[] {
  const out: (number | null)[] = closes.map(() => null);
  let g = 0;
  let l = 0;
  for (let i = 1; i < closes.length; i++) {
    const ch = closes[i]! - closes[i - 1]!;
    const up = Math.max(ch, 0);
    const down = Math.max(-ch, 0);
    if (i <= n) {
      g += up / n;
      l += down / n;
      if (i < n) continue;
    } else {
      g = (g * (n - 1) + up) / n;
      l = (l * (n - 1) + down) / n;
    }
    out[i] = l === 0 ? 100 : 100 - 100 / (1 + g / l);
  }
  return out;
}

describe('rsiWilder', () => {
  it('reproduces the StockCharts/Wilder textbook RSI-14 table to 2 decimals', () => {
    // StockCharts "Relative Strength Index (RSI)" ChartSchool example (cs-rsi.xls), closes as printed there.
    const closes = [
      44.3389, 44.0902, 44.1497, 43.6124, 44.3278, 44.8264, 45.0955, 45.4245, 45.8433, 46.0826, 45.8931, 46.0328, 45.614, 46.282, 46.282,
      46.0028, 46.0328, 46.4116, 46.2222, 45.6439, 46.2122, 46.2521, 45.7137, 46.4515, 45.7835, 45.3548, 44.0288, 44.1783, 44.2181, 44.5672,
      43.4205, 42.6628, 43.1314,
    ];
    const expected = [
      70.53, 66.32, 66.55, 69.41, 66.36, 57.97, 62.93, 63.26, 56.06, 62.38, 54.71, 50.42, 39.99, 41.46, 41.87, 45.46, 37.3, 33.08, 37.77,
    ];
    const r = rsiWilder(closes, 14);
    assert.equal(r.length, closes.length);
    for (let i = 0; i < 14; i++) assert.equal(r[i], null, `index ${i} must not be warm`);
    assert.deepEqual(
      r.slice(14).map((x) => Math.round(x! * 100) / 100),
      expected,
    );
  });

  it('matches an independent Wilder implementation on real BTC closes', () => {
    const closes = loadCandles('btc').map((c) => c.close);
    const a = rsiWilder(closes, 14);
    const b = refRsi(closes, 14);
    assert.equal(a.length, b.length);
    for (let i = 0; i < a.length; i++) {
      if (b[i] === null) assert.equal(a[i], null);
      else assert.ok(Math.abs(a[i]! - b[i]!) < 1e-9, `i=${i}: ${a[i]} vs ${b[i]}`);
    }
  });

  it('is 100 when there are no losses and rejects bad input', () => {
    const r = rsiWilder([1, 2, 3, 4, 5, 6], 3);
    assert.equal(r[3], 100);
    assert.throws(() => rsiWilder([1, NaN, 2], 2), RangeError);
    assert.throws(() => rsiWilder([1, 2, 3], 0), RangeError);
  });
});

describe('sma / ema / pctChange', () => {
  it('SMA of a small array, by hand', () => {
    assert.deepEqual(sma([2, 4, 6, 8, 10], 3), [null, null, 4, 6, 8]);
    assert.deepEqual(sma([5], 1), [5]);
  });

  it('EMA: alpha 2/(n+1), seeded with the first value, reported from index n-1', () => {
    // by hand: alpha = 0.5; 1 -> 1.5 -> 2.25 -> 3.125 -> 4.0625
    assert.deepEqual(ema([1, 2, 3, 4, 5], 3), [null, null, 2.25, 3.125, 4.0625]);
    const closes = loadCandles('eth').map((c) => c.close);
    const a = ema(closes, 20);
    let e = closes[0]!;
    for (let i = 0; i < closes.length; i++) {
      if (i > 0) e = closes[i]! * (2 / 21) + e * (1 - 2 / 21);
      if (i < 19) assert.equal(a[i], null);
      else assert.ok(Math.abs(a[i]! - e) < 1e-9 * e);
    }
    // the seed's weight at the first reported value is (1 - alpha)^(n - 1), as documented
    const seed = ema([1, ...Array<number>(20).fill(0)], 14);
    assert.ok(Math.abs(seed[13]! - (13 / 15) ** 13) < 1e-12);
  });

  it('pctChange in percent, null before warm-up and on a zero base', () => {
    assert.deepEqual(pctChange([100, 110, 0, 121], 1), [null, 10.000000000000009, -100, null]);
    assert.deepEqual(
      pctChange([100, 50, 200], 2).map((x) => (x === null ? null : Math.round(x * 1e9) / 1e9)),
      [null, null, 100],
    );
  });

  it('returnOverCalendarDays uses the exact calendar day and never a neighbour', () => {
    const c = (date: string, close: number) => ({ date, close });
    const candles = [c('2024-01-01', 100), c('2024-01-02', 102), c('2024-01-04', 110), c('2024-01-05', 99)];
    const r = returnOverCalendarDays(candles, 2);
    // 01-04 vs 01-02 = +7.843...%; 01-05 vs 01-03 (missing) = null; 01-02 vs 12-31 (missing) = null
    assert.equal(r[0], null);
    assert.equal(r[1], null);
    assert.ok(Math.abs(r[2]! - (110 / 102 - 1) * 100) < 1e-12);
    assert.equal(r[3], null);
  });
});
