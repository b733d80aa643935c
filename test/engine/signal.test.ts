import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeChainHealthSeries } from '../../src/engine/chain-health.ts';
import { computeRegimeSeries, regimeAt } from '../../src/engine/regime.ts';
import {
  computeSignalSeries,
  CURRENT_MODEL,
  levelRule,
  levelWithHysteresis,
  MODEL_V1,
  lowersConviction,
  MODEL_V2,
  MODEL_V3,
  MODEL_V4,
  SIGNAL_WEIGHTS,
  SIGNAL_WEIGHTS_V2,
  signalChanges,
  signalLevel,
} from '../../src/engine/signal.ts';
import { SIGNAL_LEVELS } from '../../src/engine/types.ts';
import type { Candle, SignalResult } from '../../src/engine/types.ts';
import { addDays } from '../../src/engine/util.ts';
import { ASSETS, loadCandles, loadChain, loadFearGreed, loadFunding } from './real-data.ts';

const SOURCES = { prices: 'prices.csv', fear_greed: 'fear_greed.csv', funding: 'funding.csv', chain_health: 'chain health' };
const day = (i: number) => addDays('2024-01-01', i);
const flat = (n: number): Candle[] =>
  Array.from({ length: n }, (_, i) => ({ date: day(i), open: 1, high: 1, low: 1, close: 1, volume: null }));

/** All real-data series, computed the way the service does. */
function realSeries(only?: string) {
  const fg = loadFearGreed();
  const btc = loadCandles('btc');
  const regime = computeRegimeSeries({ btc, fearGreed: fg, funding: loadFunding('btc_daily') });
  return ASSETS.filter((a) => only === undefined || a.asset === only).map((a) => {
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

  it("model v2's bands are symmetric, so strong_sell is as reachable as strong_buy", () => {
    const b = MODEL_V2.bands;
    assert.equal(signalLevel(b.strong + 0.0001, b), 'strong_buy');
    assert.equal(signalLevel(b.strong, b), 'buy');
    assert.equal(signalLevel(b.buy, b), 'neutral');
    assert.equal(signalLevel(-b.buy, b), 'neutral');
    assert.equal(signalLevel(-b.buy - 0.0001, b), 'sell');
    assert.equal(signalLevel(-b.strong, b), 'sell');
    assert.equal(signalLevel(-b.strong - 0.0001, b), 'strong_sell');
  });
});

describe('levelWithHysteresis', () => {
  const m = { bands: { buy: 0.3, strong: 0.55 }, margin: 0.05 };
  it('leaves the current level only when the score passes its band edge by the margin', () => {
    assert.equal(levelWithHysteresis(0.32, 'neutral', m), 'neutral'); // in the buy band, not 0.05 past its edge
    assert.equal(levelWithHysteresis(0.36, 'neutral', m), 'buy');
    assert.equal(levelWithHysteresis(0.27, 'buy', m), 'buy'); // below 0.3 but not below 0.25
    assert.equal(levelWithHysteresis(0.24, 'buy', m), 'neutral');
    assert.equal(levelWithHysteresis(-0.7, 'buy', m), 'strong_sell'); // a jump goes straight to the score's band
    assert.equal(levelWithHysteresis(0.2, 'neutral', m), 'neutral');
  });
  it('is the plain band without a margin', () => {
    for (const s of [-0.9, -0.4, 0, 0.4, 0.9])
      assert.equal(levelWithHysteresis(s, 'neutral', { ...m, margin: 0 }), signalLevel(s, m.bands));
  });
});

describe('computeSignalSeries', () => {
  it('base weights sum to 1 (v1 and v2); the service serves v4 (v2 weights)', () => {
    assert.ok(Math.abs(Object.values(SIGNAL_WEIGHTS).reduce((a, b) => a + b, 0) - 1) < 1e-12);
    assert.ok(Math.abs(Object.values(SIGNAL_WEIGHTS_V2).reduce((a, b) => a + b, 0) - 1) < 1e-12);
    assert.equal(CURRENT_MODEL.version, 'signals-v4');
    assert.equal(CURRENT_MODEL.weights, SIGNAL_WEIGHTS_V2);
  });

  it('v3 asymmetric confirmation: leaving a buy or sell level happens at once, entering still takes 3 days', () => {
    // Funding alone drives the score: -0.5 (sell band) for 4 days from day 5, then back to 0.
    const funding = Array.from({ length: 12 }, (_, i) => ({ date: day(i), rate: i >= 5 && i <= 8 ? 0.0003 : 0.0001 }));
    const input = { asset: 'x', candles: flat(12), fearGreed: [], funding, regime: [], chainHealth: null, sources: SOURCES };
    const v3 = computeSignalSeries(input, MODEL_V3).map((s) => s.signal);
    const v2 = computeSignalSeries(input, MODEL_V2).map((s) => s.signal);
    const n = (k: number) => Array<string>(k).fill('neutral');
    // both enter on day 7 (third day in the band); v3 leaves on day 9 (first day back at 0), v2 on day 11
    assert.deepEqual(v3, [...n(7), 'sell', 'sell', ...n(3)]);
    assert.deepEqual(v2, [...n(7), 'sell', 'sell', 'sell', 'sell', 'neutral']);
    // level_rule says why: days 5 and 6 wait for confirmation, v2's days 9 and 10 likewise on the way out.
    const r3 = computeSignalSeries(input, MODEL_V3).map((s) => s.level_rule);
    const r2 = computeSignalSeries(input, MODEL_V2).map((s) => s.level_rule);
    assert.deepEqual(
      r3.map((r) => r.reason),
      [...Array<string>(5).fill('band'), 'confirmation', 'confirmation', 'band', 'band', 'band', 'band', 'band'],
    );
    assert.deepEqual(r3[6]!.pending, { signal: 'sell', days: 2, needed: 3 });
    assert.equal(r3[6]!.score_level, 'sell');
    assert.match(r3[6]!.explanation, /neutral is kept until sell has held for 3 consecutive days \(day 2 of 3\)/);
    assert.deepEqual(r2[10]!.pending, { signal: 'neutral', days: 2, needed: 3 });
    assert.equal(r2[10]!.reason, 'confirmation');
    assert.equal(r3[0]!.pending, null);
    assert.ok(lowersConviction('strong_buy', 'buy') && lowersConviction('buy', 'sell') && lowersConviction('sell', 'neutral'));
    assert.ok(!lowersConviction('neutral', 'buy') && !lowersConviction('buy', 'strong_buy') && !lowersConviction('sell', 'strong_sell'));
  });

  it("v4 starts neutral: an asset's first level needs the 3-day confirmation too; v3 reported the first day's band at once", () => {
    // Funding alone drives the score: -0.5 (sell band) from the first day.
    const funding = Array.from({ length: 6 }, (_, i) => ({ date: day(i), rate: 0.0003 }));
    const input = { asset: 'x', candles: flat(6), fearGreed: [], funding, regime: [], chainHealth: null, sources: SOURCES };
    const v4 = computeSignalSeries(input, MODEL_V4);
    const v3 = computeSignalSeries(input, MODEL_V3);
    assert.deepEqual(
      v3.map((s) => s.signal),
      Array<string>(6).fill('sell'),
    );
    assert.deepEqual(
      v4.map((s) => s.signal),
      ['neutral', 'neutral', 'sell', 'sell', 'sell', 'sell'],
    );
    assert.deepEqual(
      v4.map((s) => s.score),
      v3.map((s) => s.score),
      'the score is unchanged',
    );
    assert.equal(v4[0]!.level_rule.reason, 'confirmation');
    assert.deepEqual(v4[0]!.level_rule.pending, { signal: 'sell', days: 1, needed: 3 });
    // The first day's level is where the series starts, not one kept from an earlier day.
    assert.match(
      v4[0]!.level_rule.explanation,
      /; the history starts at neutral, and sell takes over once it has held for 3 consecutive days \(day 1 of 3\)\.$/,
    );
    assert.match(v4[1]!.level_rule.explanation, /; neutral is kept until sell has held for 3 consecutive days \(day 2 of 3\)\.$/);
    assert.match(v3[0]!.level_rule.explanation, /is in the sell band \(below -0\.\d+\); the history starts at sell\.$/);
    assert.ok(v3.slice(1).every((s) => !s.level_rule.explanation.includes('history starts')));
    assert.equal(MODEL_V4.version, 'signals-v4');
    assert.deepEqual({ ...MODEL_V4, version: 'signals-v3', startNeutral: undefined }, { ...MODEL_V3, startNeutral: undefined });
  });

  it('v3 volatility gate: no buy while the 90-day downside semideviation exceeds the 365-day one; the score is unchanged', () => {
    // 400 days: returns alternate +1% / -1% until day 330, then +5% / -5%; Fear & Greed at 100 every day
    // (score about +0.55 from Fear & Greed alone: momentum and RSI stay near 0).
    let close = 100;
    const candles: Candle[] = Array.from({ length: 400 }, (_, i) => {
      if (i > 0) close *= 1 + (i % 2 === 0 ? 1 : -1) * (i < 330 ? 0.01 : 0.05);
      return { date: day(i), open: close, high: close, low: close, close, volume: null };
    });
    const fearGreed = candles.map((c) => ({ date: c.date, value: 100, classification: 'Extreme Greed' }));
    const input = { asset: 'x', candles, fearGreed, funding: null, regime: [], chainHealth: null, sources: SOURCES };
    const gated = computeSignalSeries(input, MODEL_V3);
    const open = computeSignalSeries(input, { ...MODEL_V3, volGate: null });
    for (let i = 0; i < 400; i++) assert.equal(gated[i]!.score, open[i]!.score);
    // Day 300: a year of calm returns, 90 days of calm: the gate is open and the signal is the same.
    assert.ok(['buy', 'strong_buy'].includes(open[300]!.signal));
    assert.equal(gated[300]!.signal, open[300]!.signal);
    // Day 399: the last 70 days swing 5 %: recent downside risk is above the year's, no buy.
    assert.ok(['buy', 'strong_buy'].includes(open[399]!.signal));
    assert.equal(gated[399]!.signal, 'neutral');
    // The API says why: the score's band is a buy, the gate holds it at neutral, with the ratio.
    const rule = gated[399]!.level_rule;
    assert.equal(rule.reason, 'volatility_gate');
    assert.ok(['buy', 'strong_buy'].includes(rule.score_level));
    assert.equal(rule.volatility_gate!.open, false);
    assert.ok(rule.volatility_gate!.downside_ratio! > 1, `ratio ${rule.volatility_gate!.downside_ratio}`);
    assert.match(rule.explanation, /held at neutral while the 90-day downside semideviation/);
    assert.equal(gated[300]!.level_rule.volatility_gate!.open, true);
    assert.ok(gated[300]!.level_rule.volatility_gate!.downside_ratio! <= 1);
    assert.equal(gated[200]!.level_rule.volatility_gate!.downside_ratio, null, 'too few returns in the year: no ratio, gate open');
    assert.equal(gated[200]!.level_rule.volatility_gate!.open, true);
    assert.equal(open[399]!.level_rule.volatility_gate, null, 'a model without the gate reports none');
    // With fewer than 240 returns in the year the gate is open (missing data never blocks).
    assert.ok(['buy', 'strong_buy'].includes(gated[250]!.signal));
  });

  it('hand-checked v2: Fear & Greed read with the trend, contrarian funding, confirmation, confidence', () => {
    // 10 flat candles: momentum and RSI are cold; no regime given; trend is not part of v2.
    const series = computeSignalSeries(
      {
        asset: 'x',
        candles: flat(10),
        fearGreed: [{ date: day(9), value: 20, classification: 'Extreme Fear' }],
        funding: [{ date: day(8), rate: 0.0003 }],
        regime: [],
        chainHealth: null,
        sources: SOURCES,
      },
      MODEL_V2,
    );
    const r = series.at(-1)!;
    const f = Object.fromEntries(r.factors.map((x) => [x.name, x]));
    assert.deepEqual(Object.keys(f), ['fear_greed', 'funding_rate']);
    assert.equal(f.fear_greed!.score, -0.6); // (20 - 50) / 50: fear is bearish in v2
    assert.equal(f.funding_rate!.score, -0.5); // (0.0001 - 0.0003) / 0.0004
    assert.equal(f.fear_greed!.weight, 0.5); // 0.25 / (0.25 + 0.25)
    assert.equal(f.funding_rate!.weight, 0.5);
    assert.equal(r.score, -0.55); // -0.3 - 0.25
    // Day 8 (funding only, -0.5) and day 9 (-0.55) point to sell, but a new level needs 3 days.
    assert.equal(series[8]!.score, -0.5);
    assert.deepEqual(
      series.map((s) => s.signal),
      Array(10).fill('neutral'),
    );
    // coverage 0.5 / 0.9 (chain_health not applicable, trend not in v2) x agreement 1
    assert.equal(r.confidence, Math.round((0.5 / 0.9) * 1e4) / 1e4);
    assert.deepEqual(
      r.missing_factors.map((m) => m.name),
      ['momentum', 'rsi', 'regime'],
    );
    assert.match(f.fear_greed!.explanation, /20 \(Extreme Fear\)/);
  });

  it('v2 confirmation: a level changes on the third consecutive day its band holds, in the band of that day', () => {
    // Funding alone drives the score: -0.5 (sell band) for 3 days from day 5, then back to 0.
    const funding = Array.from({ length: 12 }, (_, i) => ({ date: day(i), rate: i >= 5 && i <= 7 ? 0.0003 : 0.0001 }));
    const series = computeSignalSeries(
      {
        asset: 'x',
        candles: flat(12),
        fearGreed: [],
        funding,
        regime: [],
        chainHealth: null,
        sources: SOURCES,
      },
      MODEL_V2,
    );
    assert.deepEqual(
      series.map((s) => s.signal),
      // sell from day 7 (the third day at -0.5); neutral again on day 10, the third day back at 0
      ['neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'neutral', 'sell', 'sell', 'sell', 'neutral', 'neutral'],
    );
    // Two days in the band are not enough.
    const short = funding.map((p, i) => ({ ...p, rate: i >= 5 && i <= 6 ? 0.0003 : 0.0001 }));
    const s2 = computeSignalSeries(
      {
        asset: 'x',
        candles: flat(12),
        fearGreed: [],
        funding: short,
        regime: [],
        chainHealth: null,
        sources: SOURCES,
      },
      MODEL_V2,
    );
    assert.ok(s2.every((s) => s.signal === 'neutral'));
  });

  it('hand-checked v1 (still available for the backtest): contrarian F&G and funding, renormalized weights, confidence', () => {
    // 10 flat candles: trend, momentum and RSI are cold; no regime given
    const r = computeSignalSeries(
      {
        asset: 'x',
        candles: flat(10),
        fearGreed: [{ date: day(9), value: 20, classification: 'Extreme Fear' }],
        funding: [{ date: day(8), rate: 0.0003 }],
        regime: [],
        chainHealth: null,
        sources: SOURCES,
      },
      MODEL_V1,
    ).at(-1)!;
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
    const present = noF.factors.reduce((a, f) => a + SIGNAL_WEIGHTS_V2[f.name], 0);
    assert.ok(Math.abs(present - 0.65) < 1e-12); // 0.9 applicable (no chain, no trend in v2) - 0.25 funding
    for (const f of noF.factors) assert.ok(Math.abs(f.weight - SIGNAL_WEIGHTS_V2[f.name] / present) <= 0.0001, `${f.name} ${f.weight}`);
    assert.ok(Math.abs(noF.factors.reduce((a, f) => a + f.weight, 0) - 1) < 1e-9);
  });

  it('on real data, every day: contributions sum to the score, weights to 1, levels and ranges hold', () => {
    const seen = new Set<string>();
    const reasons = new Set<string>();
    for (const a of realSeries()) {
      assert.equal(a.series.length, a.candles.length);
      for (const [i, s] of a.series.entries()) {
        seen.add(s.signal);
        assert.equal(s.as_of, a.candles[i]!.date);
        const sum = s.factors.reduce((acc, f) => acc + f.contribution, 0);
        assert.ok(Math.abs(sum - s.score) < 1e-9, `${a.asset} ${s.as_of}: ${sum} vs ${s.score}`);
        if (s.factors.length > 0) assert.ok(Math.abs(s.factors.reduce((acc, f) => acc + f.weight, 0) - 1) < 1e-9);
        // Hysteresis and confirmation: the level either carries over or changes to the band of the day's
        // score, or to neutral from a buy band when the volatility gate is closed.
        // Before the first day the level counts as neutral (v4's startNeutral).
        const prev = i > 0 ? a.series[i - 1]!.signal : 'neutral';
        const band = signalLevel(s.score, CURRENT_MODEL.bands);
        if (prev !== s.signal)
          assert.ok(s.signal === band || (s.signal === 'neutral' && (band === 'buy' || band === 'strong_buy')), `${a.asset} ${s.as_of}`);
        // level_rule: 'band' exactly when the level is the score's band; otherwise one rule says why.
        const rule = s.level_rule;
        assert.equal(rule.score_level, band);
        assert.equal(rule.reason === 'band', s.signal === band, `${a.asset} ${s.as_of}: ${rule.reason}`);
        if (rule.reason === 'volatility_gate') assert.ok(s.signal === 'neutral' && rule.volatility_gate!.open === false);
        if (rule.reason === 'confirmation') assert.equal(rule.pending!.signal, band);
        reasons.add(rule.reason);
        assert.ok(s.score >= -1 && s.score <= 1);
        assert.ok(s.confidence >= 0 && s.confidence <= 1);
        for (const f of s.factors) {
          assert.ok(f.score >= -1 && f.score <= 1);
          assert.equal(f.contribution, Math.round(f.weight * f.score * 1e4) / 1e4 || 0);
          assert.ok(f.as_of <= s.as_of, 'no factor input from the future');
        }
        const names = new Set([...s.factors.map((f) => f.name), ...s.missing_factors.map((m) => m.name)]);
        assert.equal(names.size, a.chain ? 6 : 5); // v2 has no own-asset trend factor
      }
      const last = a.series.at(-1)!;
      if (!a.funding) assert.ok(last.missing_factors.some((m) => m.name === 'funding_rate'));
    }
    assert.deepEqual([...seen].sort(), [...SIGNAL_LEVELS].sort(), 'all five levels occur, strong_sell included');
    assert.deepEqual([...reasons].sort(), ['band', 'confirmation', 'hysteresis', 'volatility_gate'], 'every rule decides some day');
  });

  it('lazy factors, missing_factors and level_rule: own enumerable keys, the same whatever the order they are read in', () => {
    const [btc] = realSeries('bitcoin');
    const again = realSeries('bitcoin')[0]!;
    const keys = ['signal', 'score', 'confidence', 'factors', 'missing_factors', 'level_rule', 'as_of'];
    // Nothing read yet: the entries have exactly the documented own enumerable keys, no hidden state.
    assert.deepEqual(Object.keys(btc!.series[0]!), keys);
    assert.deepEqual(Object.getOwnPropertySymbols(btc!.series[0]!), []);
    // One copy read day by day in order (JSON), the other interleaved: the level rules and
    // missing factors from the last day back, then the factors of every other day, then the rest.
    const forward = JSON.stringify(btc!.series);
    for (let i = again.series.length - 1; i >= 0; i--) {
      void again.series[i]!.missing_factors;
      void again.series[i]!.level_rule;
    }
    for (let i = 0; i < again.series.length; i += 2) void again.series[i]!.factors;
    assert.equal(JSON.stringify(again.series), forward);
    const mid = btc!.series[1500]!;
    // Spreading reads the accessors; after a read the property is a plain data property.
    const copy = { ...mid };
    assert.deepEqual(Object.keys(copy), keys);
    assert.ok(Array.isArray(copy.factors) && copy.factors.length > 0);
    assert.equal(typeof Object.getOwnPropertyDescriptor(mid, 'factors')!.value, 'object');
    // Assigning replaces the lazy value.
    const fresh = realSeries('bitcoin')[0]!.series[1500]!;
    fresh.level_rule = mid.level_rule;
    assert.equal(fresh.level_rule, mid.level_rule);
    assert.deepEqual(Object.keys(fresh), keys);
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
      level_rule: levelRule(MODEL_V1, { score, level: signalLevel(score), held: false, gateClosed: false, gateRatio: null, pending: null }),
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
