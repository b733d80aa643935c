import { z } from 'zod';
import {
  REGIME_ORDER,
  SIGNAL_ORDER,
  THESIS_CONDITION_KINDS,
  THESIS_DIRECTIONS,
  THESIS_METRIC_SCALES,
  THESIS_METRICS,
  THESIS_OPERATORS,
  THESIS_STATUSES,
} from '../../engine/thesis.ts';
import { Day, Instant, PageCursor, RegimeLevel, SignalLevel, bound, safeText } from './common.ts';

/** Schemas of theses: the POST /thesis body, a stored thesis, the list, and the health evaluation. */

/** Metrics whose condition value is a level name rather than a number. */
const CATEGORICAL: Record<string, readonly string[]> = { signal: SignalLevel.options, regime: RegimeLevel.options };

/**
 * Whether a comparison with the lowest (`atLow`) or highest (`atHigh`) value of a scale can
 * never hold (`lt` lowest, `gt` highest) or always holds (`gte` lowest, `lte` highest); null
 * when it can go either way.
 */
function atScaleEnd(operator: string, atLow: boolean, atHigh: boolean): 'never' | 'always' | null {
  if ((atLow && operator === 'lt') || (atHigh && operator === 'gt')) return 'never';
  if ((atLow && operator === 'gte') || (atHigh && operator === 'lte')) return 'always';
  return null;
}

/**
 * Highest price a thesis may give, USD (entry, target and stop prices, and a `price_usd`
 * condition's value): far above any asset's, and a bound on nonsense (1e308).
 */
const MAX_PRICE_USD = 1e12;

/** The one wording of the price cap, for the thesis prices and a `price_usd` condition's value. */
const overCap = (given: number, what = ''): string =>
  `must be at most ${bound(MAX_PRICE_USD)}${what} (USD, the cap of every thesis price), got ${bound(given)}: give a price at most ${bound(MAX_PRICE_USD)}`;

/** A condition as sent by the client (its id is assigned by the service when absent). */
export const ConditionInputSchema = z
  .object({
    id: safeText(1, 64).optional().describe('Your id for the condition; generated when absent'),
    metric: z.enum(THESIS_METRICS).describe('What the condition tests'),
    operator: z.enum(THESIS_OPERATORS),
    value: z
      .union([z.number().finite(), safeText(1, 32)], {
        error: 'must be a finite number (numeric metrics) or a level name (signal, regime)',
      })
      .describe(
        `A number for numeric metrics (price_usd USD at most ${bound(MAX_PRICE_USD)}, change_7d_pct %, rsi_14 0..100, signal_score -1..1, fear_greed 0..100, funding_rate fraction per 8 h, chain_health_score 0..100); a level for signal/regime`,
      ),
    kind: z.enum(THESIS_CONDITION_KINDS).default('warning').describe('invalidation ends the thesis; warning lowers its health'),
  })
  .strict()
  .superRefine((c, ctx) => {
    const levels = CATEGORICAL[c.metric];
    if (levels) {
      if (typeof c.value !== 'string' || !levels.includes(c.value)) {
        ctx.addIssue({ code: 'custom', path: ['value'], message: `must be one of ${levels.join(', ')} for metric '${c.metric}'` });
        return;
      }
      // On the ordinal scale, past either end a comparison never holds or always holds.
      const order = c.metric === 'signal' ? SIGNAL_ORDER : REGIME_ORDER;
      const end = atScaleEnd(c.operator, c.value === order[0], c.value === order.at(-1));
      if (end)
        ctx.addIssue({
          code: 'custom',
          path: ['operator'],
          message: `${c.metric} ${c.operator} ${c.value} would ${end} hold (the scale runs ${order.join(' < ')}): use eq, neq or another level`,
        });
    } else if (typeof c.value !== 'number') {
      ctx.addIssue({ code: 'custom', path: ['value'], message: `must be a number for metric '${c.metric}'` });
    } else {
      const s = THESIS_METRIC_SCALES[c.metric];
      if (!s) return;
      const below = s.min !== null && (s.open === 'min' ? c.value <= s.min : c.value < s.min);
      const above = s.max !== null && c.value > s.max;
      if (below || above) {
        const scale = s.max === null ? `${s.open === 'min' ? 'above' : 'at least'} ${s.min}` : `from ${s.min} to ${s.max}`;
        ctx.addIssue({
          code: 'custom',
          path: ['value'],
          message: `${c.value} is outside the scale of '${c.metric}' (${scale}): give a value ${scale}`,
        });
        return;
      }
      // Prices are capped as the thesis's own prices are: 1e308 is no price.
      if (c.metric === 'price_usd' && c.value > MAX_PRICE_USD) {
        ctx.addIssue({
          code: 'custom',
          path: ['value'],
          message: overCap(c.value, " for metric 'price_usd'"),
        });
        return;
      }
      // The Fear & Greed index is a whole number: equal to 50.5 it never is.
      if (c.metric === 'fear_greed' && (c.operator === 'eq' || c.operator === 'neq') && !Number.isInteger(c.value)) {
        ctx.addIssue({
          code: 'custom',
          path: ['value'],
          message: `fear_greed is a whole number (0..100), so ${c.operator} ${c.value} would ${c.operator === 'eq' ? 'never' : 'always'} hold: give a whole number`,
        });
        return;
      }
      // At an end of a closed scale a comparison never or always holds, as at a level scale's.
      const end = atScaleEnd(c.operator, s.min !== null && s.open !== 'min' && c.value === s.min, s.max !== null && c.value === s.max);
      if (end)
        ctx.addIssue({
          code: 'custom',
          path: ['operator'],
          message: `${c.metric} ${c.operator} ${c.value} would ${end} hold (${c.value} is an end of its scale): use eq, neq or a value inside the scale`,
        });
    }
  });

const Price = z
  .number()
  .finite()
  .positive()
  .max(MAX_PRICE_USD, { error: (iss) => overCap(iss.input as number) })
  .describe(`USD (above 0, at most ${bound(MAX_PRICE_USD)})`);

/** Body of POST /thesis. */
export const ThesisInputSchema = z
  .object({
    asset: safeText(1, 64).describe('Asset id or ticker, e.g. bitcoin or BTC'),
    direction: z.enum(THESIS_DIRECTIONS),
    title: safeText(1, 200),
    entry_price: Price.nullable().optional(),
    target_price: Price.nullable().optional(),
    stop_price: Price.nullable().optional(),
    // The bounds before .int(): zod checks in order and the message names the first failure, and
    // .int() also bounds to the safe integers, so 1e300 was told "at most 9.007199254740991e15"
    // instead of the route's 3650 (README, "Theses": every bad field is a 400 that names it).
    horizon_days: z.number().min(1).max(3650).int().nullable().optional(),
    conditions: z.array(ConditionInputSchema).max(20).default([]),
  })
  .strict()
  .superRefine((t, ctx) => {
    const ids = new Set<string>();
    t.conditions.forEach((c, i) => {
      if (c.id === undefined) return;
      if (ids.has(c.id)) ctx.addIssue({ code: 'custom', path: ['conditions', i, 'id'], message: `duplicate condition id '${c.id}'` });
      ids.add(c.id);
    });
    // Prices have sides: a long's stop below its entry and its target, its target above its
    // entry (a short the other way round); else a stop and a target could both be hit at once.
    const long = t.direction === 'long';
    /** True when both are given and `a` is not below `b` on a long (not above it on a short). */
    const wrongSide = (a: number | null | undefined, b: number | null | undefined) => a != null && b != null && (long ? a >= b : a <= b);
    const sides: ['stop_price' | 'target_price', boolean, string][] = [
      ['stop_price', wrongSide(t.stop_price, t.entry_price), `${long ? 'below' : 'above'} entry_price`],
      ['target_price', wrongSide(t.entry_price, t.target_price), `${long ? 'above' : 'below'} entry_price`],
      ['stop_price', wrongSide(t.stop_price, t.target_price), `${long ? 'below' : 'above'} target_price`],
    ];
    for (const [field, wrong, side] of sides)
      if (wrong) ctx.addIssue({ code: 'custom', path: [field], message: `must be ${side} for a ${t.direction} thesis` });
  });
/** A POST /thesis body as sent (before defaults). */
export type ThesisInputBody = z.input<typeof ThesisInputSchema>;

/** A stored condition (README, "Theses"). */
export const ConditionSchema = z.object({
  id: z.string(),
  metric: z.enum(THESIS_METRICS),
  operator: z.enum(THESIS_OPERATORS),
  value: z.union([z.number(), z.string()]),
  kind: z.enum(THESIS_CONDITION_KINDS),
});

/** A stored thesis (README, "Theses"). */
export const ThesisSchema = z.object({
  id: z.uuid(),
  asset: z.string(),
  symbol: z.string(),
  name: z.string(),
  direction: z.enum(THESIS_DIRECTIONS),
  title: z.string(),
  entry_price: z.number().nullable(),
  target_price: z.number().nullable(),
  stop_price: z.number().nullable(),
  horizon_days: z.number().int().nullable(),
  conditions: z.array(ConditionSchema),
  created_at: Instant,
  updated_at: Instant,
});
/** A stored thesis as returned by the thesis routes. */
export type Thesis = z.infer<typeof ThesisSchema>;

/** GET /thesis/{id}/health (method: docs/methodology.md, "Thesis health"). */
export const ThesisHealthSchema = z.object({
  thesis_id: z.uuid(),
  asset: z.string(),
  direction: z.enum(THESIS_DIRECTIONS),
  health_score: z.number().min(0).max(100).nullable().describe('0..100; null when nothing could be evaluated'),
  status: z.enum(THESIS_STATUSES),
  action_required: z.boolean().describe('An invalidation holds, the stop is hit, or the score is below 40'),
  triggered_conditions: z.array(ConditionSchema.extend({ current_value: z.union([z.number(), z.string()]) })),
  unevaluable_conditions: z
    .array(ConditionSchema.extend({ reason: z.string() }))
    .describe('Conditions whose metric has no data for this asset (reported, not guessed)'),
  components: z
    .array(z.object({ name: z.string(), score: z.number(), weight: z.number(), detail: z.string() }))
    .describe(
      'signal_alignment and price_position (0..100) averaged with their weights; warnings (100 − 25 per triggered warning, weight 0) multiplies that average',
    ),
  stop_hit: z.boolean().nullable(),
  target_hit: z.boolean().nullable(),
  horizon: z
    .object({
      days: z.number().int().describe("The thesis's horizon_days"),
      ends_at: Instant.describe('created_at plus horizon_days × 24 h, ISO 8601 UTC'),
      days_left: z.number().int().min(0).describe('Whole days from evaluated_at to ends_at, rounded up; 0 once passed'),
      passed: z.boolean().describe('True once evaluated_at is at or after ends_at'),
    })
    .nullable()
    .describe(
      "The thesis against its own deadline, on the wall clock (not the data's as_of); null without horizon_days. Changes neither health_score nor action_required",
    ),
  current: z
    .object({
      price_usd: z.number().nullable(),
      change_7d_pct: z.number().nullable(),
      rsi_14: z.number().nullable(),
      signal: SignalLevel.nullable(),
      signal_score: z.number().nullable(),
      regime: RegimeLevel.nullable(),
      fear_greed: z.number().nullable(),
      funding_rate: z.number().nullable(),
      chain_health_score: z.number().nullable(),
    })
    .describe('The metric values the conditions were evaluated against'),
  evaluated_at: Instant.describe('Wall-clock time of the evaluation, ISO 8601 UTC'),
  as_of: Day.describe('Day of the market data used'),
  stale: z
    .boolean()
    .describe("True when an input of `current` is older than its cadence allows (the asset's signal, the regime, its chain health)"),
  stale_reason: z.string().nullable().describe('Which inputs are stale and since when, as those answers give it; null when fresh'),
});
/** `data` of GET /thesis/{id}/health. */
export type ThesisHealthData = z.infer<typeof ThesisHealthSchema>;

/** One thesis of GET /thesis: with `include_health=true`, also its health (or why it has none). */
export const ListedThesisSchema = ThesisSchema.extend({
  health: ThesisHealthSchema.nullable()
    .optional()
    .describe(
      'With include_health=true: as GET /thesis/{id}/health answers it; null when it could not be evaluated (health_error says why)',
    ),
  health_error: z
    .object({ code: z.string(), message: z.string() })
    .optional()
    .describe('With include_health=true, when the health could not be evaluated: the error GET /thesis/{id}/health gives'),
});
/** One thesis of GET /thesis. */
export type ListedThesis = z.infer<typeof ListedThesisSchema>;

/** `data` of GET /thesis: one page of theses, each with its health when `include_health=true`. */
export const ThesisListSchema = z.object({
  theses: z.array(ListedThesisSchema).describe('Newest first'),
  limit: z.number().int().describe('The most theses a page holds'),
  next_cursor: z.string().nullable().describe('Pass it as `cursor` for the next (older) page; null on the last page'),
});

/**
 * The most theses one user may keep (README, "Theses"): a bound on what one account can
 * store, far above what a person follows (the list pages 200 at a time). Deleting one frees
 * its place.
 */
export const MAX_THESES = 500;

/** Page sizes of GET /thesis: the most a page may hold, and the default. */
export const THESIS_PAGE = { max: 200, default: 50 } as const;

/** `cursor` of GET /thesis: a page's `next_cursor`, passed back unchanged. */
export const ThesisCursor = PageCursor;

/** Path parameter of the thesis routes and input of the single-thesis operations. */
export const ThesisIdInput = z.object({ id: z.string().min(1).max(64).describe('Thesis id (UUID)') });

/** `data` of DELETE /thesis/{id}. */
export const DeletedThesisSchema = z.object({ id: z.uuid(), deleted: z.literal(true) });
