import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeChainHealthSeries } from '../../src/engine/chain-health.ts';
import { computeRegimeSeries, regimeAt } from '../../src/engine/regime.ts';
import { computeSignalSeries, SIGNAL_WEIGHTS, signalChanges, signalLevel } from '../../src/engine/signal.ts';
import type { Candle, SignalResult } from '../../src/engine/types.ts';
import { addDays } from '../../src/engine/util.ts';
import { ASSETS, loadCandles, loadChain, loadFearGreed, loadFunding } from './real-data.ts';

const SOURCES = { prices: 'prices.csv', fear_greed: 'fear_greed.csv', funding: 'funding.csv', chain_health: 'chain health' };
const day = (i: number) => addDays('2024-01-01', i);
const flat = (n: number): Candle[] =>
  Array.from({ length: n }, (_, i) => ({ date: day(i), open: 1, high: 1, low: 1, close: 1, volume: null }));

/** All real-data series, computed the way the service does. */
function realSeries() {
  const fg = loadFearGreed();
  const btc = loadCandles('btc');
  const regime = computeRegimeSeries({ btc, fearGreed: fg, funding: loadFunding('btc_daily') });
  return ASSETS.map((a) => {
    const candles = loadCandles(a.file);
    const funding = a.funding ? loadFunding(a.funding) : null;
    const chainHealth = a.chain
      ? computeChainHealthSeries({
          chain: a.chain.id,
          metrics: loadChain(a.chain.file),
          regimeByDate: (d) => regimeAt(regime, d)?.regime ?? 'neutral',
          dates: candles.map((c) => c.date),
        })
      : null;
    return {
      ...a,
      candles,
      series: computeSignalSeries({ asset: a.asset, candles, fearGreed: fg, funding, regime, chainHealth, sources: SOURCES }),
    };
  });
}

describe('signalLevel', () => {
  it("uses TradingView's technical-rating bands", () => {
    const cases: [number, string][] = [
      [1, 'strong_buy'],
      [0.5001, 'strong_buy'],
      [0.5, 'buy'],
      [0.1001, 'buy'],
      [0.1, 'neutral'],
      [0, 'neutral'],
      [-0.1, 'neutral'],
      [-0.1001, 'sell'],
      [-0.5, 'sell'],
      [-0.5001, 'strong_sell'],
      [-1, 'strong_sell'],
    ];
    for (const [s, level] of cases) assert.equal(signalLevel(s), level, `score ${s}`);
  });
});

describe('computeSignalSeries', () => {
  it('base weights sum to 1', () => {
    assert.ok(Math.abs(Object.values(SIGNAL_WEIGHTS).reduce((a, b) => a + b, 0) - 1) < 1e-12);
  });

  it('hand-checked: contrarian F&G and funding, renormalized weights, confidence', () => {
    // 10 flat candles: trend, momentum and RSI are cold; no regime given
    const r = computeSignalSeries({
      asset: 'x',
      candles: flat(10),
      fearGreed: [{ date: day(9), value: 20, classification: 'Extreme Fear' }],
      funding: [{ date: day(8), rate: 0.0003 }],
      regime: [],
      chainHealth: null,
      sources: SOURCES,
    }).at(-1)!;
    const f = Object.fromEntries(r.factors.map((x) => [x.name, x]));
    assert.deepEqual(Object.keys(f), ['fear_greed', 'funding_rate']);
    assert.equal(f.fear_greed!.score, 0.6); // (50 - 20) / 50
    assert.equal(f.funding_rate!.score, -0.5); // (0.0001 - 0.0003) / 0.0004
    assert.equal(f.fear_greed!.weight, 0.5);
    assert.equal(f.funding_rate!.weight, 0.5);
    assert.equal(f.funding_rate!.as_of, day(8));
    assert.equal(r.score, 0.05); // 0.3 - 0.25
    assert.equal(r.signal, 'neutral');
    // coverage 0.2 / 0.9 (chain_health not applicable) x agreement 0.05 / 0.55
    assert.equal(r.confidence, Math.round((0.2 / 0.9) * (0.05 / 0.55) * 1e4) / 1e4);
    assert.deepEqual(
      r.missing_factors.map((m) => m.name),
      ['trend', 'momentum', 'rsi', 'regime'],
    );
    assert.match(f.fear_greed!.explanation, /20 \(Extreme Fear\)/);
  });

  it('missing funding: funding_rate is listed missing and the other weights are renormalized', () => {
    const candles = loadCandles('eth');
    const fg = loadFearGreed();
    const regime = computeRegimeSeries({ btc: loadCandles('btc'), fearGreed: fg, funding: loadFunding('btc_daily') });
    const withF = computeSignalSeries({
      asset: 'ethereum',
      candles,
      fearGreed: fg,
      funding: loadFunding('eth_daily'),
      regime,
      chainHealth: null,
      sources: SOURCES,
    }).at(-1)!;
    const noF = computeSignalSeries({
      asset: 'ethereum',
      candles,
      fearGreed: fg,
      funding: null,
      regime,
      chainHealth: null,
      sources: SOURCES,
    }).at(-1)!;
    assert.ok(withF.factors.some((f) => f.name === 'funding_rate'));
    assert.ok(!noF.factors.some((f) => f.name === 'funding_rate'));
    assert.deepEqual(noF.missing_factors, [{ name: 'funding_rate', reason: 'no funding-rate source for ethereum' }]);
    const present = noF.factors.reduce((a, f) => a + SIGNAL_WEIGHTS[f.name], 0);
    assert.ok(Math.abs(present - 0.8) < 1e-12); // 0.9 applicable - 0.1 funding
    for (const f of noF.factors) assert.ok(Math.abs(f.weight - SIGNAL_WEIGHTS[f.name] / present) <= 0.0001, `${f.name} ${f.weight}`);
    assert.ok(Math.abs(noF.factors.reduce((a, f) => a + f.weight, 0) - 1) < 1e-9);
  });

  it('on real data, every day: contributions sum to the score, weights to 1, levels and ranges hold', () => {
    for (const a of realSeries()) {
      assert.equal(a.series.length, a.candles.length);
      for (const [i, s] of a.series.entries()) {
        assert.equal(s.as_of, a.candles[i]!.date);
        const sum = s.factors.reduce((acc, f) => acc + f.contribution, 0);
        assert.ok(Math.abs(sum - s.score) < 1e-9, `${a.asset} ${s.as_of}: ${sum} vs ${s.score}`);
        if (s.factors.length > 0) assert.ok(Math.abs(s.factors.reduce((acc, f) => acc + f.weight, 0) - 1) < 1e-9);
        assert.equal(s.signal, signalLevel(s.score));
        assert.ok(s.score >= -1 && s.score <= 1);
        assert.ok(s.confidence >= 0 && s.confidence <= 1);
        for (const f of s.factors) {
          assert.ok(f.score >= -1 && f.score <= 1);
          assert.equal(f.contribution, Math.round(f.weight * f.score * 1e4) / 1e4 || 0);
          assert.ok(f.as_of <= s.as_of, 'no factor input from the future');
        }
        const names = new Set([...s.factors.map((f) => f.name), ...s.missing_factors.map((m) => m.name)]);
        assert.equal(names.size, a.chain ? 7 : 6);
      }
      const last = a.series.at(-1)!;
      if (!a.funding) assert.ok(last.missing_factors.some((m) => m.name === 'funding_rate'));
    }
  });
});

describe('signalChanges', () => {
  it('lists the first day and every level change, oldest first, with the close', () => {
    const mk = (date: string, score: number): SignalResult => ({
      signal: signalLevel(score),
      score,
      confidence: 0.5,
      factors: [],
      missing_factors: [],
      as_of: date,
    });
    const series = [mk(day(0), 0), mk(day(1), 0.05), mk(day(2), 0.2), mk(day(3), 0.3), mk(day(4), -0.2)];
    const prices = series.map((s, i) => ({ date: s.as_of, open: 1, high: 1, low: 1, close: 100 + i, volume: null }));
    const ch = signalChanges(series, prices);
    assert.deepEqual(
      ch.map((c) => [c.changed_at, c.previous_signal, c.signal, c.price_usd]),
      [
        [day(0), null, 'neutral', 100],
        [day(2), 'neutral', 'buy', 102],
        [day(4), 'buy', 'sell', 104],
      ],
    );
  });
});
