/**
 * Thesis health: how well a user's trade thesis (long/short an asset, optional entry, target
 * and stop prices, conditions) holds against the current market snapshot.
 * Method: docs/methodology.md, "Thesis health".
 */
import type { RegimeLevel, SignalLevel } from './types.ts';
import { clamp, DAY_MS, round } from './util.ts';

/** Metrics a thesis condition may test (the HTTP layer builds its zod enum from this). */
export const THESIS_METRICS = [
  'price_usd',
  'change_7d_pct',
  'rsi_14',
  'signal',
  'signal_score',
  'regime',
  'fear_greed',
  'funding_rate',
  'chain_health_score',
] as const;
/** Comparison operators of a condition. */
export const THESIS_OPERATORS = ['lt', 'lte', 'gt', 'gte', 'eq', 'neq'] as const;
/** Kinds of condition: an invalidation ends the thesis, a warning lowers its health. */
export const THESIS_CONDITION_KINDS = ['invalidation', 'warning'] as const;
/** Trade directions. */
export const THESIS_DIRECTIONS = ['long', 'short'] as const;
/** Health statuses. */
export const THESIS_STATUSES = ['healthy', 'weakening', 'at_risk', 'invalidated'] as const;

export type ThesisMetric = (typeof THESIS_METRICS)[number];
export type ThesisOperator = (typeof THESIS_OPERATORS)[number];
export type ThesisConditionKind = (typeof THESIS_CONDITION_KINDS)[number];
export type ThesisDirection = (typeof THESIS_DIRECTIONS)[number];
export type ThesisStatus = (typeof THESIS_STATUSES)[number];

/**
 * The scale of each numeric metric, [min, max] (null: unbounded on that side), inclusive
 * unless `open`: RSI-14, Fear & Greed and the chain health score are 0..100 by construction,
 * the signal score −1..1, a price positive, a 7-day change at least −100 %; the funding rate
 * may take any sign and size. A condition's value outside its scale could never hold, or
 * would always hold (ThesisInputSchema refuses it).
 */
export const THESIS_METRIC_SCALES: Partial<Record<ThesisMetric, { min: number | null; max: number | null; open?: 'min' }>> = {
  price_usd: { min: 0, max: null, open: 'min' },
  change_7d_pct: { min: -100, max: null },
  rsi_14: { min: 0, max: 100 },
  signal_score: { min: -1, max: 1 },
  fear_greed: { min: 0, max: 100 },
  chain_health_score: { min: 0, max: 100 },
};

/** Ordinal scales of the categorical metrics, so lt/gt work on them (sell < buy, bear < bull). */
export const SIGNAL_ORDER: readonly SignalLevel[] = ['strong_sell', 'sell', 'neutral', 'buy', 'strong_buy'];
export const REGIME_ORDER: readonly RegimeLevel[] = ['bear', 'neutral', 'bull'];

/**
 * One condition. `value` is a number for the numeric metrics (units: price_usd USD,
 * change_7d_pct percent, rsi_14 0..100, signal_score -1..1, fear_greed 0..100, funding_rate
 * fraction per 8 h, chain_health_score 0..100) and a level name for `signal` / `regime`.
 */
export interface ThesisCondition {
  id: string;
  metric: ThesisMetric;
  operator: ThesisOperator;
  value: number | string;
  kind: ThesisConditionKind;
}

/** The thesis fields the evaluation needs (prices in USD, optional). */
export interface ThesisInput {
  direction: ThesisDirection;
  entry_price?: number | null;
  target_price?: number | null;
  stop_price?: number | null;
  conditions: readonly ThesisCondition[];
}

/** Current values of the metrics for the thesis's asset; null when unavailable. */
export type ThesisSnapshot = {
  price_usd: number | null;
  change_7d_pct: number | null;
  rsi_14: number | null;
  signal: SignalLevel | null;
  signal_score: number | null;
  regime: RegimeLevel | null;
  fear_greed: number | null;
  funding_rate: number | null;
  chain_health_score: number | null;
};

/** A condition that holds, with the value that made it hold. */
export interface TriggeredCondition extends ThesisCondition {
  current_value: number | string;
}

/** A condition that could not be evaluated (metric unavailable, or a value of the wrong type). */
export interface UnevaluableCondition extends ThesisCondition {
  reason: string;
}

/** One part of the health score: `score` 0..100, `weight` after renormalization (sum 1). */
export interface ThesisHealthComponent {
  name: 'signal_alignment' | 'price_position' | 'warnings';
  score: number;
  weight: number;
  detail: string;
}

/** Result of {@link evaluateThesis}. */
export interface ThesisHealth {
  /** 0..100 (1 decimal); 0 when invalidated; null when no component could be computed. */
  health_score: number | null;
  status: ThesisStatus;
  action_required: boolean;
  triggered_conditions: TriggeredCondition[];
  unevaluable_conditions: UnevaluableCondition[];
  components: ThesisHealthComponent[];
  /** Long: price <= stop; short: price >= stop; null when price or stop is unknown. */
  stop_hit: boolean | null;
  /** Long: price >= target; short: price <= target; null when price or target is unknown. */
  target_hit: boolean | null;
}

/**
 * Base weights of the averaged health components (renormalized over those present). Warnings
 * are not averaged in: they scale the result (WARNING_PENALTY).
 */
export const THESIS_COMPONENT_WEIGHTS = { signal_alignment: 0.4, price_position: 0.3 } as const;
/**
 * Percent of the health taken away per triggered warning (4 warnings -> 0): the health is the
 * weighted average × (100 − 25·n) / 100. A multiplier, not an averaged component: averaged in,
 * a triggered warning (75) raised a thesis whose other components averaged less.
 */
export const WARNING_PENALTY = 25;
/** Stop distance (percent of price) at which the stop-only position component is 100. */
export const STOP_DISTANCE_FULL_PCT = 10;
/** Status bands: healthy >= 60, weakening >= 40, at_risk below; action required below 40. */
export const THESIS_HEALTHY_MIN = 60;
export const THESIS_ACTION_BELOW = 40;

function ordinal(metric: ThesisMetric, v: unknown): number | null {
  if (metric === 'signal') {
    const i = SIGNAL_ORDER.indexOf(v as SignalLevel);
    return i < 0 ? null : i;
  }
  if (metric === 'regime') {
    const i = REGIME_ORDER.indexOf(v as RegimeLevel);
    return i < 0 ? null : i;
  }
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function compare(op: ThesisOperator, a: number, b: number): boolean {
  switch (op) {
    case 'lt':
      return a < b;
    case 'lte':
      return a <= b;
    case 'gt':
      return a > b;
    case 'gte':
      return a >= b;
    case 'eq':
      return a === b;
    case 'neq':
      return a !== b;
  }
}

/**
 * Evaluates one condition against the snapshot.
 * @returns `{ holds, current }`, or `{ reason }` when it cannot be evaluated (null metric, an
 *   unknown level name, or a number/string mismatch). Categorical metrics compare by their
 *   order (SIGNAL_ORDER, REGIME_ORDER).
 */
export function evaluateCondition(
  c: ThesisCondition,
  snapshot: ThesisSnapshot,
): { holds: boolean; current: number | string } | { reason: string } {
  if (!(THESIS_METRICS as readonly string[]).includes(c.metric)) return { reason: `unknown metric '${c.metric}'` };
  if (!(THESIS_OPERATORS as readonly string[]).includes(c.operator)) return { reason: `unknown operator '${c.operator}'` };
  const current = snapshot[c.metric];
  if (current === null || current === undefined) return { reason: `${c.metric} is not available for this asset at this time` };
  const a = ordinal(c.metric, current);
  const b = ordinal(c.metric, c.value);
  if (a === null || b === null) {
    const expected = c.metric === 'signal' ? SIGNAL_ORDER.join('|') : c.metric === 'regime' ? REGIME_ORDER.join('|') : 'a finite number';
    return { reason: `value ${JSON.stringify(c.value)} is not valid for ${c.metric} (expected ${expected})` };
  }
  return { holds: compare(c.operator, a, b), current };
}

/**
 * Whether a thesis's stop is reached at `price`: a long's when the price is at or below it,
 * a short's when at or above it (both in USD). The one rule for the health's `stop_hit` and
 * for refusing, at creation, a stop the current price has already reached.
 */
export function stopHit(direction: ThesisInput['direction'], price: number, stop: number): boolean {
  return direction === 'short' ? price >= stop : price <= stop;
}

/**
 * Health of a thesis against a snapshot.
 *
 * Averaged components (0..100 each; weights 0.4 / 0.3, renormalized over those present):
 * - signal_alignment: 50 + 50 * d * signal_score (d = +1 long, -1 short); absent without a score.
 * - price_position: with stop and target, the position of the price between them
 *   (stop = 0, target = 100, clamped); with a stop only, the distance to it as a share of 10 %
 *   of the price (>= 10 % away = 100); absent without price or stop.
 * The score is their weighted average times the `warnings` multiplier: 100 − 25 per triggered
 * warning (floor 0), in percent, listed as a component of weight 0 when the thesis has warning
 * conditions (absent otherwise). A triggered warning therefore always lowers the score; with
 * no averaged component the score is null (unassessable), warnings or not.
 *
 * Status: `invalidated` when an invalidation condition holds or the stop is hit (then
 * health_score = 0); else healthy (>= 60), weakening (>= 40), at_risk (< 40, or no averaged component
 * at all: health cannot be assessed). `action_required` when invalidated or below 40 / unassessable.
 * A condition on an unavailable metric never triggers; it is listed in `unevaluable_conditions`.
 */
export function evaluateThesis(thesis: ThesisInput, snapshot: ThesisSnapshot): ThesisHealth {
  const dir = thesis.direction === 'short' ? -1 : 1;
  const triggered: TriggeredCondition[] = [];
  const unevaluable: UnevaluableCondition[] = [];
  for (const c of thesis.conditions) {
    const r = evaluateCondition(c, snapshot);
    if ('reason' in r)
      unevaluable.push({ id: c.id, metric: c.metric, operator: c.operator, value: c.value, kind: c.kind, reason: r.reason });
    else if (r.holds)
      triggered.push({ id: c.id, metric: c.metric, operator: c.operator, value: c.value, kind: c.kind, current_value: r.current });
  }

  const price = snapshot.price_usd;
  const stop = thesis.stop_price ?? null;
  const target = thesis.target_price ?? null;
  const stopReached = price === null || stop === null ? null : stopHit(thesis.direction, price, stop);
  const targetHit = price === null || target === null ? null : dir === 1 ? price >= target : price <= target;

  const parts: { name: keyof typeof THESIS_COMPONENT_WEIGHTS; score: number; detail: string }[] = [];
  if (snapshot.signal_score !== null) {
    const s = clamp(snapshot.signal_score, -1, 1);
    parts.push({
      name: 'signal_alignment',
      score: 50 + 50 * dir * s,
      detail: `signal ${snapshot.signal ?? 'n/a'} with score ${s} for a ${thesis.direction} thesis`,
    });
  }
  if (price !== null && stop !== null) {
    const validRange = target !== null && (dir === 1 ? target > stop : target < stop);
    if (validRange) {
      const pos = clamp((price - stop) / (target! - stop), 0, 1);
      parts.push({
        name: 'price_position',
        score: 100 * pos,
        detail: `price ${price} is ${round(pos * 100, 1)}% of the way from stop ${stop} to target ${target}`,
      });
    } else {
      const distPct = ((price - stop) / price) * 100 * dir;
      parts.push({
        name: 'price_position',
        score: 100 * clamp(distPct / STOP_DISTANCE_FULL_PCT, 0, 1),
        detail: `price ${price} is ${round(distPct, 2)}% away from stop ${stop} (${STOP_DISTANCE_FULL_PCT}% or more scores 100)`,
      });
    }
  }
  const wsum = parts.reduce((a, p) => a + THESIS_COMPONENT_WEIGHTS[p.name], 0);
  const components: ThesisHealthComponent[] = parts.map((p) => ({
    name: p.name,
    score: round(p.score, 1),
    weight: round(THESIS_COMPONENT_WEIGHTS[p.name] / wsum, 4),
    detail: p.detail,
  }));
  const average = parts.length > 0 ? parts.reduce((a, p) => a + (THESIS_COMPONENT_WEIGHTS[p.name] / wsum) * p.score, 0) : null;
  const warnings = thesis.conditions.filter((c) => c.kind === 'warning');
  let raw = average;
  if (warnings.length > 0) {
    const n = triggered.filter((c) => c.kind === 'warning').length;
    const kept = Math.max(0, 100 - WARNING_PENALTY * n);
    raw = average === null ? null : (average * kept) / 100;
    components.push({
      name: 'warnings',
      score: kept,
      weight: 0,
      detail:
        `${n} of ${warnings.length} warning conditions hold: ` +
        (average === null
          ? `no signal score or stop to scale, so the health cannot be assessed`
          : `the weighted average ${round(average, 1)} is multiplied by ${kept / 100}`),
    });
  }

  const invalidated = triggered.some((c) => c.kind === 'invalidation') || stopReached === true;
  const health_score = invalidated ? 0 : raw === null ? null : round(raw, 1);
  const status: ThesisStatus = invalidated
    ? 'invalidated'
    : health_score === null
      ? 'at_risk'
      : health_score >= THESIS_HEALTHY_MIN
        ? 'healthy'
        : health_score >= THESIS_ACTION_BELOW
          ? 'weakening'
          : 'at_risk';
  const action_required = invalidated || health_score === null || health_score < THESIS_ACTION_BELOW;
  return {
    health_score,
    status,
    action_required,
    triggered_conditions: triggered,
    unevaluable_conditions: unevaluable,
    components,
    stop_hit: stopReached,
    target_hit: targetHit,
  };
}

/** Where a thesis stands against its horizon (`horizon` of GET /thesis/{id}/health). */
export interface ThesisHorizon {
  /** The thesis's `horizon_days`. */
  days: number;
  /** `created_at` plus `days` × 24 h, ISO 8601 UTC. */
  ends_at: string;
  /** Whole days from the evaluation to `ends_at`, rounded up; 0 once it has passed. */
  days_left: number;
  /** True once the evaluation is at or after `ends_at`: the thesis has had its time. */
  passed: boolean;
}

/**
 * The thesis's horizon against the wall clock: it starts when the thesis was created and
 * runs `horizonDays` days of 24 h (docs/methodology.md, "Thesis health"). Wall-clock time,
 * not the market data's as-of day, because the horizon is the owner's own deadline. It is
 * reported beside the health and changes neither `health_score` nor `action_required`.
 * @param createdAt when the thesis was stored
 * @param horizonDays the thesis's `horizon_days` (1..3650), or null when it has none
 * @param now the evaluation's time
 * @returns null when the thesis has no horizon
 */
export function thesisHorizon(createdAt: Date, horizonDays: number | null, now: Date): ThesisHorizon | null {
  if (horizonDays === null) return null;
  const endsMs = createdAt.getTime() + horizonDays * DAY_MS;
  const leftMs = endsMs - now.getTime();
  return {
    days: horizonDays,
    ends_at: new Date(endsMs).toISOString(),
    days_left: leftMs > 0 ? Math.ceil(leftMs / DAY_MS) : 0,
    passed: leftMs <= 0,
  };
}
