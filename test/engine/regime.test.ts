import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeRegimeSeries, fundingState, regimeAt, REGIME_CONFIRM_DAYS } from '../../src/engine/regime.ts';
import type { Candle, FearGreedPoint, FundingPoint } from '../../src/engine/types.ts';
import { addDays } from '../../src/engine/util.ts';

const START = '2024-01-01';
const day = (i: number) => addDays(START, i);
/** Flat candles: RSI, SMA-200 and the 30-day return stay cold for < 15 days, so F&G and funding drive the score. */
function candles(n: number): Candle[] {
  return Array.from({ length: n }, (_, i) => ({ date: day(i), open: 100, high: 100, low: 100, close: 100, volume: null }));
}
function fg(values: (number | null)[]): FearGreedPoint[] {
  return values.flatMap((v, i) =>
    v === null ? [] : [{ date: day(i), value: v, classification: v >= 55 ? 'Greed' : v <= 45 ? 'Fear' : 'Neutral' }],
  );
}

describe('computeRegimeSeries', () => {
  it('hysteresis: a 1- or 2-day flip does not change the regime, 3 days do', () => {
    assert.equal(REGIME_CONFIRM_DAYS, 3);
    // F&G score = (v - 50) / 50: 50 -> 0 (neutral), 80 -> +0.6 (bull), 20 -> -0.6 (bear)
    const values = [50, 50, 80, 50, 80, 80, 50, 20, 80, 80, 80, 50];
    const r = computeRegimeSeries({ btc: candles(values.length), fearGreed: fg(values), funding: [] });
    assert.equal(r.length, values.length);
    assert.deepEqual(
      r.map((x) => x.score),
      values.map((v) => (v - 50) / 50),
    );
    assert.deepEqual(
      r.map((x) => x.regime),
      ['neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'bull', 'bull'],
    );
    assert.equal(r[9]!.since, day(0));
    assert.equal(r[10]!.since, day(10), 'since = the day the new regime was confirmed');
    assert.equal(r[11]!.since, day(10));
    // the day-11 raw class is neutral again: one day does not flip back
    assert.equal(r[11]!.score, 0);
  });

  it('hysteresis counts candles: a day without a BTC candle neither breaks a run nor counts in it', () => {
    const values = [50, 50, 80, 80, 80, 80];
    // day 3 has no candle (F&G still has a value that day): bull on days 2, 4, 5 confirms on day 5
    const btc = candles(values.length).filter((c) => c.date !== day(3));
    const r = computeRegimeSeries({ btc, fearGreed: fg(values), funding: [] });
    assert.deepEqual(
      r.map((x) => [x.as_of, x.regime]),
      [
        [day(0), 'neutral'],
        [day(1), 'neutral'],
        [day(2), 'neutral'],
        [day(4), 'neutral'],
        [day(5), 'bull'],
      ],
    );
    assert.equal(r.at(-1)!.since, day(5));
  });

  it('a missing condition is null and its weight is redistributed', () => {
    // day 0: F&G 80 and funding 0.0005 (extreme, +1); day 1: F&G gap (5 days stale later), funding only
    const values: (number | null)[] = [80, null, null, null, null, null];
    const funding: FundingPoint[] = [0, 1, 2, 3, 4, 5].map((i) => ({ date: day(i), rate: i === 0 ? 0.0005 : -0.0002 }));
    const r = computeRegimeSeries({ btc: candles(6), fearGreed: fg(values), funding });
    // day 0: weights F&G 0.2, funding 0.15 -> (0.2*0.6 + 0.15*1) / 0.35
    assert.equal(r[0]!.score, Math.round(((0.2 * 0.6 + 0.15 * 1) / 0.35) * 1e4) / 1e4);
    assert.equal(r[0]!.conditions.funding_rate!.state, 'extreme');
    assert.equal(r[0]!.conditions.funding_rate!.annualized_pct, 54.75); // 0.0005 * 3 * 365 * 100
    // days 1..3: F&G from day 0 is still within 3 days; day 4: stale -> null, funding alone (-1)
    assert.equal(r[3]!.conditions.fear_greed!.as_of, day(0));
    assert.equal(r[4]!.conditions.fear_greed, null);
    assert.equal(r[4]!.score, -1);
    assert.equal(r[4]!.conditions.rsi, null);
    assert.equal(r[4]!.conditions.momentum, null);
  });

  it('confidence is coverage x support and stays in [0, 1]', () => {
    const values = [80, 80, 80];
    const r = computeRegimeSeries({ btc: candles(3), fearGreed: fg(values), funding: [] });
    // coverage = F&G weight 0.2; support for bull at score 0.6 = min(1, 0.6/0.5) = 1
    assert.equal(r[0]!.regime, 'bull');
    assert.equal(r[0]!.confidence, 0.2);
  });

  it('funding states use the documented thresholds', () => {
    assert.equal(fundingState(-0.00001), 'negative');
    assert.equal(fundingState(0), 'neutral');
    assert.equal(fundingState(0.0001), 'neutral');
    assert.equal(fundingState(0.00010001), 'elevated');
    assert.equal(fundingState(0.0003), 'elevated');
    assert.equal(fundingState(0.00031), 'extreme');
  });

  it('regimeAt returns the newest result on or before the date', () => {
    const r = computeRegimeSeries({ btc: candles(5).filter((_, i) => i !== 2), fearGreed: fg([50, 50, 50, 50, 50]), funding: [] });
    assert.equal(regimeAt(r, day(2))!.as_of, day(1));
    assert.equal(regimeAt(r, day(4))!.as_of, day(4));
    assert.equal(regimeAt(r, '2023-12-31'), null);
  });

  it('rejects unsorted input', () => {
    const c = candles(3);
    assert.throws(() => computeRegimeSeries({ btc: [c[1]!, c[0]!], fearGreed: [], funding: [] }), RangeError);
  });
});
