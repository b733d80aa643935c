import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  BASELINE_DAYS,
  CHAIN_HEALTH_METRICS,
  chainHealthAt,
  chainStatus,
  computeChainHealthSeries,
  healthScore,
} from '../../src/engine/chain-health.ts';
import type { MetricPoint } from '../../src/engine/types.ts';
import { addDays } from '../../src/engine/util.ts';

const START = '2024-01-01';
const day = (i: number) => addDays(START, i);
const series = (n: number, f: (i: number) => number | null): MetricPoint[] =>
  Array.from({ length: n }, (_, i) => f(i)).flatMap((v, i) => (v === null ? [] : [{ date: day(i), value: v }]));

/**
 * Independent reference: calendar-day loops, 7-day mean ending at D vs the 7-day means ending on
 * each of the 90 days before the recent window (>= 4 values each, >= 60 such days).
 */
function refZ(pts: MetricPoint[], dIdx: number): number | null {
  const byDay = new Map(pts.map((p) => [p.date, p.value]));
  const mean7 = (end: number) => {
    const xs: number[] = [];
    for (let k = end - 6; k <= end; k++) {
      const v = byDay.get(day(k));
      if (v !== undefined) xs.push(v);
    }
    return xs.length >= 4 ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
  };
  const recent = mean7(dIdx);
  if (recent === null || !byDay.has(day(dIdx))) return null;
  const base: number[] = [];
  for (let t = dIdx - 96; t <= dIdx - 7; t++) {
    if (!byDay.has(day(t))) continue;
    const m = mean7(t);
    if (m !== null) base.push(m);
  }
  if (base.length < 60) return null;
  const mu = base.reduce((a, b) => a + b, 0) / base.length;
  const sd = Math.sqrt(base.reduce((a, b) => a + (b - mu) ** 2, 0) / (base.length - 1));
  return Math.max(-3, Math.min(3, (recent - mu) / sd));
}

describe('computeChainHealthSeries', () => {
  it('per-metric z matches an independent calendar-day implementation (with gaps)', () => {
    // deterministic noisy series with a few missing days
    const tvl = series(200, (i) => (i % 11 === 5 ? null : 1000 + 50 * Math.sin(i / 3) + i * 2));
    const tx = series(200, (i) => (i % 17 === 3 ? null : 500 + ((i * 37) % 23)));
    const dates = [120, 150, 199].map(day);
    const res = computeChainHealthSeries({ chain: 'sol', metrics: { tvl, transactions: tx }, regimeByDate: () => 'neutral', dates });
    for (const [k, r] of res.entries()) {
      const dIdx = [120, 150, 199][k]!;
      const zt = refZ(tvl, dIdx);
      const zx = refZ(tx, dIdx);
      const comp = Object.fromEntries(r.components.map((c) => [c.metric, c]));
      if (zt === null) assert.ok(!comp.tvl);
      else assert.ok(Math.abs(comp.tvl!.z_score - zt) < 1e-4, `tvl ${comp.tvl?.z_score} vs ${zt}`);
      if (zx === null) assert.ok(!comp.transactions);
      else assert.ok(Math.abs(comp.transactions!.z_score - zx) < 1e-4, `tx ${comp.transactions?.z_score} vs ${zx}`);
      // composite = sum of contributions; weights renormalized to 1
      const sumW = r.components.reduce((a, c) => a + c.weight, 0);
      assert.ok(Math.abs(sumW - 1) < 1e-9);
      assert.ok(Math.abs(r.components.reduce((a, c) => a + c.contribution, 0) - r.z_score!) < 1e-9);
      assert.equal(r.score, healthScore(r.z_score!, 1));
      assert.equal(r.date, dates[k]);
      assert.equal(r.window_days, BASELINE_DAYS);
    }
  });

  it('hand-checked: a jump to a new level after a steady baseline clips z at +3; map and status', () => {
    // baseline alternates 100/110 (7-day means vary a little), last 7 days 200
    const m = series(120, (i) => (i >= 113 ? 200 : i % 2 ? 110 : 100));
    const [r] = computeChainHealthSeries({ chain: 'sol', metrics: { tvl: m }, regimeByDate: () => 'neutral', dates: [day(119)] });
    assert.equal(r!.components.length, 1);
    assert.equal(r!.components[0]!.z_score, 3);
    assert.equal(r!.components[0]!.value, 200);
    assert.equal(r!.components[0]!.weight, 1);
    assert.equal(r!.z_score, 3);
    // 50 + 50 * tanh(1.5) = 95.26
    assert.equal(r!.score, 95.26);
    assert.equal(r!.status, 'strong');
    // transactions absent -> missing, not invented
    assert.deepEqual(r!.missing_metrics, [{ metric: 'transactions', last_date: null, reason: 'metric not provided' }]);
  });

  it('regime sensitivity scales the composite before the map (bull 0.8, bear 1.25)', () => {
    assert.equal(healthScore(1, 0.8), Math.round((50 + 50 * Math.tanh(0.4)) * 100) / 100);
    assert.equal(healthScore(1, 1.25), Math.round((50 + 50 * Math.tanh(0.625)) * 100) / 100);
    const m = series(120, (i) => (i >= 113 ? 130 : 100 + (i % 3)));
    const mk = (reg: 'bull' | 'bear') =>
      computeChainHealthSeries({ chain: 'sol', metrics: { tvl: m }, regimeByDate: () => reg, dates: [day(119)] })[0]!;
    const bull = mk('bull');
    const bear = mk('bear');
    assert.equal(bull.z_score, bear.z_score);
    assert.equal(bull.sensitivity, 0.8);
    assert.equal(bear.sensitivity, 1.25);
    assert.ok(bear.score! > bull.score!);
  });

  it('stale metrics are missing with their last date; no metric -> insufficient_data', () => {
    const m = series(100, (i) => 100 + (i % 5));
    const res = computeChainHealthSeries({
      chain: 'sol',
      metrics: { tvl: m, transactions: [] },
      regimeByDate: () => 'neutral',
      dates: [day(99 + 14), day(99 + 15), day(200)],
    });
    assert.notEqual(res[0]!.status, 'insufficient_data'); // 14 days old: still usable
    assert.equal(res[1]!.status, 'insufficient_data');
    assert.equal(res[1]!.score, null);
    assert.equal(res[1]!.z_score, null);
    assert.equal(res[1]!.as_of, null);
    assert.deepEqual(res[1]!.missing_metrics[0], {
      metric: 'tvl',
      last_date: day(99),
      reason: 'stale: newest value is 15 days old (limit 14)',
    });
    assert.equal(res[1]!.missing_metrics[1]!.metric, 'transactions');
  });

  it('a constant series with gaps is flat (z 0, score 50), not float noise blown up to a z', () => {
    // 0.1 on every day but a few: 7-day means over 5, 6 or 7 values differ in the last bits
    // (0.1 * 5 / 5 !== 0.1 * 7 / 7), so the stdev was ~1e-17 and the z any value (1.04 here).
    const flat = series(120, (i) => (i % 7 === 3 || i % 11 === 5 ? null : 0.1));
    const dates = [day(105), day(110), day(119)];
    const res = computeChainHealthSeries({ chain: 'sol', metrics: { tvl: flat }, regimeByDate: () => 'neutral', dates });
    for (const r of res) {
      assert.equal(r.components[0]!.z_score, 0, r.date);
      assert.equal(r.score, 50, r.date);
    }
    // a constant baseline and a different recent level still clip at ±3
    const step = series(120, (i) => (i % 7 === 3 ? null : i >= 113 ? 0.3 : 0.1));
    const [up] = computeChainHealthSeries({ chain: 'sol', metrics: { tvl: step }, regimeByDate: () => 'neutral', dates: [day(119)] });
    assert.equal(up!.components[0]!.z_score, 3);
  });

  it('needs 60 baseline days', () => {
    // at day 64 the baseline is days -32..57; 7-day means (>= 4 values) exist from day 3: 55 days
    const m = series(66, (i) => 100 + (i % 5));
    const res = computeChainHealthSeries({ chain: 'sol', metrics: { tvl: m }, regimeByDate: () => 'neutral', dates: [day(64), day(65)] });
    assert.equal(res[0]!.status, 'insufficient_data');
    assert.equal(res[0]!.missing_metrics[0]!.reason, 'only 55 of 90 baseline days have a 7-day mean (need 60)');
    // one more day is still short (56); the rule is what it says
    assert.equal(res[1]!.status, 'insufficient_data');
  });

  it('status bands and weights are as documented', () => {
    assert.deepEqual([75, 74.99, 60, 59.99, 40, 39.99, 25, 24.99].map(chainStatus), [
      'strong',
      'healthy',
      'healthy',
      'neutral',
      'neutral',
      'weak',
      'weak',
      'critical',
    ]);
    for (const spec of Object.values(CHAIN_HEALTH_METRICS)) assert.ok(Math.abs(spec.reduce((a, s) => a + s.weight, 0) - 1) < 1e-12);
  });

  it('chainHealthAt looks up by evaluation date', () => {
    const res = computeChainHealthSeries({ chain: 'sol', metrics: {}, regimeByDate: () => 'neutral', dates: [day(0), day(5)] });
    assert.equal(chainHealthAt(res, day(4))!.date, day(0));
    assert.equal(chainHealthAt(res, day(5))!.date, day(5));
    assert.equal(chainHealthAt(res, '2023-01-01'), null);
  });
});
