import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  evaluateThesis,
  thesisHorizon,
  THESIS_METRICS,
  THESIS_OPERATORS,
  type ThesisCondition,
  type ThesisSnapshot,
} from '../../src/engine/thesis.ts';

const snap: ThesisSnapshot = {
  price_usd: 110,
  change_7d_pct: -4,
  rsi_14: 72,
  signal: 'buy',
  signal_score: 0.3,
  regime: 'bull',
  fear_greed: 65,
  funding_rate: 0.0002,
  chain_health_score: null,
};
const cond = (
  id: string,
  metric: ThesisCondition['metric'],
  operator: ThesisCondition['operator'],
  value: number | string,
  kind: ThesisCondition['kind'] = 'warning',
): ThesisCondition => ({
  id,
  metric,
  operator,
  value,
  kind,
});

describe('evaluateThesis', () => {
  it('exports the allowed metrics and operators', () => {
    assert.equal(THESIS_METRICS.length, 9);
    assert.deepEqual([...THESIS_OPERATORS], ['lt', 'lte', 'gt', 'gte', 'eq', 'neq']);
  });

  it('hand-checked long: alignment and position averaged, a triggered warning scales the average', () => {
    const h = evaluateThesis(
      {
        direction: 'long',
        entry_price: 100,
        stop_price: 90,
        target_price: 140,
        conditions: [
          cond('w1', 'rsi_14', 'gt', 70),
          cond('w2', 'fear_greed', 'gte', 80),
          cond('i1', 'regime', 'eq', 'bear', 'invalidation'),
        ],
      },
      snap,
    );
    // signal 50 + 50*0.3 = 65 (w 0.4/0.7); position (110-90)/(140-90) = 40 (w 0.3/0.7):
    // average 38/0.7 = 54.29; warnings 1 of 2 hold -> x 0.75 = 40.7
    assert.deepEqual(
      h.components.map((c) => [c.name, c.score, c.weight]),
      [
        ['signal_alignment', 65, 0.5714],
        ['price_position', 40, 0.4286],
        ['warnings', 75, 0],
      ],
    );
    assert.equal(h.health_score, 40.7);
    assert.equal(h.status, 'weakening');
    assert.equal(h.action_required, false);
    assert.deepEqual(h.triggered_conditions, [
      { id: 'w1', metric: 'rsi_14', operator: 'gt', value: 70, kind: 'warning', current_value: 72 },
    ]);
    assert.equal(h.stop_hit, false);
    assert.equal(h.target_hit, false);
  });

  it('a triggered warning always lowers the score; one that does not hold changes nothing', () => {
    // The case that was wrong: averaged in as a component (75), a triggered warning raised a
    // thesis whose other components averaged less, here from weakening to healthy.
    const base = { direction: 'long' as const, entry_price: 100, stop_price: 105 };
    const none = evaluateThesis({ ...base, conditions: [] }, snap);
    const quiet = evaluateThesis({ ...base, conditions: [cond('w', 'rsi_14', 'gt', 90)] }, snap);
    const one = evaluateThesis({ ...base, conditions: [cond('w', 'rsi_14', 'gt', 70)] }, snap);
    const two = evaluateThesis({ ...base, conditions: [cond('w', 'rsi_14', 'gt', 70), cond('v', 'signal', 'gte', 'neutral')] }, snap);
    assert.ok(none.health_score !== null && none.health_score < 75, `a low base: ${none.health_score}`);
    assert.equal(quiet.health_score, none.health_score);
    assert.equal(one.health_score, Math.round(none.health_score! * 0.75 * 10) / 10);
    assert.ok(two.health_score! < one.health_score!, `${two.health_score} < ${one.health_score}`);
    // Warnings alone (no signal score, no stop): nothing to scale, the health cannot be assessed.
    const alone = evaluateThesis({ direction: 'long', conditions: [cond('w', 'rsi_14', 'gt', 70)] }, { ...snap, signal_score: null });
    assert.equal(alone.health_score, null);
    assert.equal(alone.status, 'at_risk');
    assert.equal(alone.action_required, true);
  });

  it('an invalidation that holds invalidates and requires action', () => {
    const h = evaluateThesis(
      {
        direction: 'long',
        conditions: [cond('i1', 'signal', 'lte', 'neutral', 'invalidation'), cond('i2', 'regime', 'eq', 'bull', 'invalidation')],
      },
      snap,
    );
    assert.equal(h.status, 'invalidated');
    assert.equal(h.health_score, 0);
    assert.equal(h.action_required, true);
    assert.deepEqual(
      h.triggered_conditions.map((c) => c.id),
      ['i2'],
    );
  });

  it('stop hit: long at or below the stop, short at or above it', () => {
    assert.equal(evaluateThesis({ direction: 'long', stop_price: 110, conditions: [] }, snap).status, 'invalidated');
    assert.equal(evaluateThesis({ direction: 'long', stop_price: 109.99, conditions: [] }, snap).stop_hit, false);
    const s = evaluateThesis({ direction: 'short', stop_price: 105, target_price: 80, conditions: [] }, snap);
    assert.equal(s.stop_hit, true);
    assert.equal(s.action_required, true);
  });

  it('short thesis against a buy signal is weak; score below 40 requires action', () => {
    const h = evaluateThesis({ direction: 'short', conditions: [] }, { ...snap, signal: 'strong_buy', signal_score: 0.8 });
    assert.equal(h.health_score, 10); // 50 - 50*0.8
    assert.equal(h.status, 'at_risk');
    assert.equal(h.action_required, true);
  });

  it('a condition on an unavailable metric is not triggered but reported unevaluable; so is a bad value', () => {
    const h = evaluateThesis(
      {
        direction: 'long',
        conditions: [
          cond('c1', 'chain_health_score', 'lt', 40, 'invalidation'),
          cond('c2', 'signal', 'eq', 'moon'),
          cond('c3', 'price_usd', 'gt', '100'),
        ],
      },
      snap,
    );
    assert.equal(h.triggered_conditions.length, 0);
    assert.deepEqual(
      h.unevaluable_conditions.map((c) => c.id),
      ['c1', 'c2', 'c3'],
    );
    assert.match(h.unevaluable_conditions[0]!.reason, /not available/);
    assert.notEqual(h.status, 'invalidated');
  });

  it('operators on numbers and on ordered levels', () => {
    const holds = (c: ThesisCondition) => evaluateThesis({ direction: 'long', conditions: [c] }, snap).triggered_conditions.length === 1;
    assert.equal(holds(cond('a', 'change_7d_pct', 'lt', -3)), true);
    assert.equal(holds(cond('a', 'change_7d_pct', 'lte', -4)), true);
    assert.equal(holds(cond('a', 'change_7d_pct', 'lt', -4)), false);
    assert.equal(holds(cond('a', 'funding_rate', 'gte', 0.0002)), true);
    assert.equal(holds(cond('a', 'fear_greed', 'neq', 65)), false);
    assert.equal(holds(cond('a', 'signal', 'gt', 'neutral')), true);
    assert.equal(holds(cond('a', 'signal', 'gt', 'buy')), false);
    assert.equal(holds(cond('a', 'regime', 'neq', 'bear')), true);
  });

  it('nothing to assess -> null score, at_risk, action required', () => {
    const h = evaluateThesis({ direction: 'long', conditions: [] }, { ...snap, signal_score: null, price_usd: null });
    assert.equal(h.health_score, null);
    assert.equal(h.status, 'at_risk');
    assert.equal(h.action_required, true);
  });
});

describe('thesisHorizon', () => {
  const created = new Date('2026-01-10T12:00:00.000Z');
  it('is null without a horizon', () => {
    assert.equal(thesisHorizon(created, null, new Date('2026-01-11T00:00:00Z')), null);
  });
  it('counts whole days left, rounded up, from the wall clock', () => {
    assert.deepEqual(thesisHorizon(created, 30, new Date('2026-01-10T12:00:00.000Z')), {
      days: 30,
      ends_at: '2026-02-09T12:00:00.000Z',
      days_left: 30,
      passed: false,
    });
    // One hour before the end: still one (partial) day left.
    assert.deepEqual(thesisHorizon(created, 30, new Date('2026-02-09T11:00:00.000Z'))?.days_left, 1);
    assert.equal(thesisHorizon(created, 30, new Date('2026-02-09T11:00:00.000Z'))?.passed, false);
  });
  it('has passed at and after its end, with 0 days left', () => {
    for (const now of ['2026-02-09T12:00:00.000Z', '2026-06-01T00:00:00.000Z']) {
      const h = thesisHorizon(created, 30, new Date(now));
      assert.equal(h?.passed, true, now);
      assert.equal(h?.days_left, 0, now);
    }
  });
});
