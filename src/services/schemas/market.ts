import { z } from 'zod';
import {
  CHAIN_STATUSES,
  FACTOR_NAMES,
  FUNDING_STATES,
  LEVEL_REASONS,
  MOMENTUM_STATES,
  RSI_STATES,
  SERIES_KINDS,
} from '../../engine/types.ts';
import { ChainId, Day, Instant, RegimeLevel, SignalLevel } from './common.ts';

/**
 * Zod schemas of the market `data` payloads (signals, regime, chain health, chain metrics,
 * assets, signal history), shared by REST (response schemas, OpenAPI) and MCP (tool
 * outputSchema). Field names and value sets: README, "Endpoints".
 */

/** One factor of a signal: raw value in `unit`, score -1..1, weight 0..1, contribution = weight * score. */
export const FactorSchema = z.object({
  name: z.enum(FACTOR_NAMES).describe('The factor (docs/methodology.md, the served model)'),
  value: z.union([z.number(), z.string()]).describe('The raw input the factor scored, in `unit`'),
  unit: z.string().describe('Unit of `value` (e.g. %, index 0-100, fraction per 8 h)'),
  score: z.number().min(-1).max(1).describe('-1 (bearish) .. 1 (bullish)'),
  weight: z.number().min(0).max(1).describe("The factor's share of the score, 0..1"),
  contribution: z.number().describe('weight * score; contributions sum to the signal score'),
  explanation: z.string().describe('Why the factor scored so, in one sentence'),
  source: z.string().describe('The data it was computed from (file or API, with the days used)'),
  as_of: Day.describe('Day of the newest input the factor used'),
});

/** A factor the asset has no (fresh) data for, with the reason; never invented. */
export const MissingFactorSchema = z.object({
  name: z.string().describe('The factor'),
  reason: z.string().describe('Why it has no value (no data, or data too old); its weight is left out of the score'),
});

/**
 * Freshness of an answer (docs/live-data.md, "Freshness"): `stale` is true when an input is
 * older than its series' cadence allows at the reference day; `stale_reason` names each such
 * input with its newest day.
 */
const Stale = {
  stale: z.boolean().describe('True when an input of this answer is older than its cadence allows'),
  stale_reason: z.string().nullable().describe('Which inputs are stale and since when; null when fresh'),
};

/**
 * Why a signal reads its level (engine `LevelRule`; docs/methodology.md, "Why a level": the
 * score's band, then hysteresis, confirmation and the v3 and v4 downside-volatility gate on buys).
 */
export const LevelRuleSchema = z
  .object({
    score_level: SignalLevel.describe("The level of the score's band alone, before hysteresis, confirmation and the gate"),
    reason: z
      .enum(LEVEL_REASONS)
      .describe(
        "Why `signal` differs from `score_level`: 'band' (it does not), 'hysteresis' (the score left the band by less than the margin), 'confirmation' (a change waits for its consecutive days: `pending`), 'volatility_gate' (buys held at neutral while downside volatility is above its norm)",
      ),
    bands: z
      .object({ buy: z.number(), strong: z.number() })
      .describe('|score| above `buy` is buy/sell, above `strong` strong_buy/strong_sell'),
    volatility_gate: z
      .object({
        open: z.boolean().describe('false: buy and strong_buy are held at neutral'),
        downside_ratio: z
          .number()
          .nullable()
          .describe(
            'Downside semideviation of daily returns over short_days / over long_days; null with too few returns (the gate is then open)',
          ),
        max: z.number().describe('The gate closes when downside_ratio is above this'),
        short_days: z.number().int(),
        long_days: z.number().int(),
      })
      .nullable()
      .describe('The downside-volatility gate on buys (models signals-v3 and signals-v4); null for a model without it'),
    pending: z
      .object({ signal: SignalLevel, days: z.number().int().min(1), needed: z.number().int().min(1) })
      .nullable()
      .describe('A change of level waiting for confirmation: the level, consecutive days so far, days needed; null when none'),
    explanation: z.string().describe('The same in one sentence'),
  })
  .describe('Why the signal reads this level given its score');

/** One asset's signal (GET /signals/{asset}; entries of GET /signals). Prices USD, changes %. */
export const SignalEntrySchema = z.object({
  asset: z.string().describe('Canonical (CoinGecko) asset id'),
  symbol: z.string().describe('Ticker, e.g. BTC'),
  name: z.string(),
  signal: SignalLevel.describe('The reported level (see `level_rule` for why it may differ from the band of `score`)'),
  score: z.number().min(-1).max(1).describe('Sum of the factor contributions (Σ weight × factor score), -1 (bearish) .. 1 (bullish)'),
  confidence: z
    .number()
    .min(0)
    .max(1)
    .describe(
      'Coverage (weight of the factors with data / weight applicable) × agreement (|Σ w·s| / Σ w·|s|): how much of the model had data and how far its factors agree, 0..1; not a probability',
    ),
  price_usd: z.number().describe("Close of the as-of day's daily candle, USD"),
  change_24h_pct: z.number().nullable().describe('Close-to-close change over 1 day, %; null when the previous day is missing'),
  change_7d_pct: z.number().nullable().describe('Close-to-close change over 7 days, %; null when that day is missing'),
  since: Day.describe('Day the current signal value began'),
  as_of: Day.describe('Day of the newest data used'),
  ...Stale,
  model_version: z.string().describe("The signal model that produced this signal (e.g. 'signals-v3'; docs/methodology.md)"),
  level_rule: LevelRuleSchema,
  factors: z.array(FactorSchema).optional().describe('With include_factors=true'),
  missing_factors: z.array(MissingFactorSchema).optional().describe('With include_factors=true: factors without data, not invented'),
});

/** `data` of GET /signals. */
export const SignalsDataSchema = z.object({
  signals: z.array(SignalEntrySchema),
  unavailable: z
    .array(z.object({ asset: z.string(), reason: z.string(), newest_date: Day.nullable().describe('Newest day of its prices') }))
    .describe('Assets with no price data at the as-of day, or prices older than their cadence allows: not served as current'),
});

/** `data` of GET /regime: the BTC regime, its conditions (RSI-14, Fear & Greed, momentum, funding rate per 8 h) and all signals. */
export const RegimeDataSchema = z.object({
  regime: RegimeLevel.describe(
    'The confirmed regime: bull (raw score ≥ 0.2), bear (≤ -0.2), else neutral; a change needs consecutive days',
  ),
  score: z.number().min(-1).max(1).describe("Today's raw (unconfirmed) composite of the conditions, -1 (bearish) .. 1 (bullish)"),
  confidence: z
    .number()
    .min(0)
    .max(1)
    .describe('Coverage of the conditions with data × their support for the regime, 0..1; not a probability'),
  since: Day.describe('Day the current regime was confirmed'),
  as_of: Day.describe('Day of the newest BTC data used'),
  ...Stale,
  conditions: z.object({
    rsi: z.object({ value: z.number(), period: z.number().int(), state: z.enum(RSI_STATES), as_of: Day }).nullable(),
    fear_greed: z.object({ value: z.number().min(0).max(100), classification: z.string(), as_of: Day }).nullable(),
    momentum: z
      .object({ return_30d_pct: z.number(), price_vs_sma_200_pct: z.number(), state: z.enum(MOMENTUM_STATES), as_of: Day })
      .nullable(),
    funding_rate: z
      .object({
        value: z.number().describe('Fraction per 8 h'),
        annualized_pct: z.number(),
        state: z.enum(FUNDING_STATES),
        as_of: Day,
      })
      .nullable(),
  }),
  signals: z.array(SignalEntrySchema),
});

/** One chain's health (GET /chain-health/{asset}): score 0..100 (50 = normal) from metric z-scores, regime-adjusted. */
export const ChainHealthSchema = z.object({
  chain: ChainId,
  name: z.string(),
  score: z.number().min(0).max(100).nullable().describe('0..100, 50 = normal; null when no metric has fresh data'),
  status: z
    .enum(CHAIN_STATUSES)
    .describe(
      'Band of `score`: strong ≥ 75, healthy ≥ 60, neutral ≥ 40, weak ≥ 25, else critical; insufficient_data when no metric is usable (fresh, with enough recent values and baseline)',
    ),
  z_score: z.number().nullable().describe('Composite z-score: the sum of the component contributions, before the regime multiplier'),
  regime: RegimeLevel.describe('The BTC regime the score is adjusted for'),
  sensitivity: z
    .number()
    .describe('Regime multiplier of the composite z (bull 0.8, neutral 1, bear 1.25): score = 50 + 50 × tanh(sensitivity × z_score / 2)'),
  components: z.array(
    z.object({
      metric: z.string(),
      value: z
        .number()
        .describe(
          "The metric's mean over the 7 calendar days ending at `as_of` (at least 4 values): the z-score's input, not the day's value that GET /chain-metrics/{asset} shows (docs/methodology.md, Chain health)",
        ),
      z_score: z.number().describe('(value - mean of the 7-day means of the 90 days before) / their sample stdev, clipped to ±3'),
      weight: z.number().describe("The metric's share of the composite among those with data"),
      contribution: z.number().describe('weight × z_score'),
      as_of: Day.describe("The metric's newest day used"),
    }),
  ),
  missing_metrics: z
    .array(z.object({ metric: z.string(), last_date: Day.nullable().describe('Its newest day, null when never'), reason: z.string() }))
    .describe(
      'Metrics left out of the score, each with why: not provided, no value, older than 14 days, fewer than 4 of the 7 recent days, or too short a baseline',
    ),
  window_days: z.number().int().describe('Baseline window of the z-scores, days'),
  as_of: Day.nullable().describe('Newest day of the metrics used; null when none was usable'),
  ...Stale,
});

/** `data` of GET /chain-health. */
export const ChainHealthListSchema = z.object({ chains: z.array(ChainHealthSchema) });

/** `data` of GET /chain-metrics/{asset}: each metric's latest value with its 7-day change (absolute and %). */
export const ChainMetricsSchema = z.object({
  chain: ChainId,
  name: z.string(),
  as_of: Day.describe('The service as-of day'),
  ...Stale,
  metrics: z.record(
    z.string(),
    z.object({
      value: z.number().nullable().describe("The metric's newest value dated on or before the as-of day, in its own unit; null when none"),
      change_7d: z
        .number()
        .nullable()
        .describe(
          '`value` minus the value dated exactly 7 days before `as_of` (12 significant digits); null when that day has no value (a gap is never bridged with a neighbouring day)',
        ),
      change_7d_pct: z
        .number()
        .nullable()
        .describe('`change_7d` / |that base value| × 100, 4 decimals; null when `change_7d` is null or the base is 0'),
      as_of: Day.nullable().describe('Day of this value; older than the service as-of day when the source stopped'),
      ...Stale,
      source: z.string(),
    }),
  ),
});

/** One supported asset with its current signal and capability flags (GET /assets). */
export const AssetEntrySchema = z.object({
  asset: z.string(),
  symbol: z.string(),
  name: z.string(),
  signal: SignalLevel.nullable(),
  score: z.number().nullable(),
  price_usd: z.number().nullable(),
  chain: ChainId.nullable(),
  data_from: Day.nullable(),
  data_to: Day.nullable(),
  capabilities: z.object({
    signals: z.boolean().describe('A current signal is served (GET /signals/{asset}): prices present and not stale'),
    factors: z.boolean().describe('The current signal comes with its factors (include_factors=true)'),
    signal_history: z
      .boolean()
      .describe(
        'The served model has computed signal changes for the asset (GET /signal-history/{asset} serves those stored), current or not',
      ),
    chain_health: z.boolean().describe('The asset has a chain health score (ETH, SOL, HYPE)'),
    chain_metrics: z.boolean().describe('The asset has raw chain metrics (ETH, SOL, HYPE)'),
    funding_rate: z.boolean().describe('A funding-rate series exists (funding_rate thesis conditions are accepted)'),
    thesis: z.boolean().describe("A thesis on the asset can be evaluated now (its health needs the asset's current signal)"),
  }),
});

/** `data` of GET /assets. */
export const AssetsDataSchema = z.object({ assets: z.array(AssetEntrySchema) });

/** One signal change with the factor snapshot computed point-in-time that day. */
export const HistoryEntrySchema = z.object({
  changed_at: Day,
  signal: SignalLevel,
  previous_signal: SignalLevel.nullable(),
  score: z.number(),
  confidence: z.number(),
  price_usd: z.number(),
  factors: z.array(FactorSchema),
  level_rule: LevelRuleSchema.nullable().describe(
    'Why the signal took this level that day (band, hysteresis, confirmation or volatility gate), as GET /signals/{asset} gives it for the current day; null on changes stored before the history kept it',
  ),
  model_version: z.string().describe('The signal model that computed this change'),
});

/** `data` of GET /signal-history/{asset}: changes newest first. */
export const HistoryDataSchema = z.object({
  asset: z.string(),
  days: z.number().int(),
  limit: z.number().int(),
  from: Day.describe('First day of the window (`end` − `days` + 1)'),
  to: Day.describe('Last day of the window: `end`, by default the as-of day'),
  next_end: Day.nullable().describe(
    'The `end` that asks for the next older page: the day of the newest stored change older than this page, so that page starts with it (a window with no change is skipped); null when no older change is stored',
  ),
  model_version: z.string().describe('The signal model whose history this is (each version has its own)'),
  entries: z.array(HistoryEntrySchema).describe('Newest first'),
});

/** One market series with its provenance and freshness (GET /status). */
export const SeriesStatusSchema = z.object({
  series: z.string().describe('`candles:<asset>`, `fear_greed`, `funding:<asset>` or `metric:<chain>:<metric>`'),
  kind: z.enum(SERIES_KINDS),
  subject: z.string().nullable().describe('Asset id (candles, funding), chain id (metric), null (Fear & Greed)'),
  metric: z.string().nullable(),
  source: z.string().describe('Where the series comes from (the last source fetched, or the bundled file)'),
  origin: z.enum(['bundled', 'live']).describe('`bundled`: only the bundled dataset so far; `live`: fetched from its upstream'),
  cadence_hours: z.number().int().describe('Expected cadence of new points, hours'),
  newest_date: Day.nullable().describe(
    'Newest day stored on or before the as-of day (AS_OF hides later days here too); null when the series has no data by then (a documented gap)',
  ),
  last_success_at: Instant.nullable().describe('Last successful fetch (ISO 8601); null when never fetched'),
  last_error: z.string().nullable().describe('Last failed fetch, kept until the next success'),
  last_error_at: Instant.nullable(),
  no_live_source: z
    .string()
    .nullable()
    .describe(
      'Why the live ingest fetches no update of this series (a documented gap, docs/live-data.md): its data ends with the bundled dataset, so live it turns stale and stays stale; null when a live source fetches it',
    ),
  ...Stale,
});

/** `data` of GET /status: the mode, the as-of and reference days, and every series' freshness. */
export const StatusDataSchema = z.object({
  mode: z.enum(['offline', 'live']).describe('`offline`: the bundled dataset, no network; `live`: ingesting from public APIs'),
  as_of: Day.describe('Newest day of the data served'),
  reference_date: Day.describe('The day freshness is judged against: yesterday (UTC) live, the as-of day offline'),
  stale_series: z.number().int().describe('How many series are stale'),
  empty_series: z
    .number()
    .int()
    .describe('How many series hold no data at all (newest_date null): gaps, counted neither as fresh nor as stale'),
  series: z.array(SeriesStatusSchema),
});

/** One daily OHLCV candle (UTC day): prices in USD; volume in the unit the source reports (the base asset for exchange data, e.g. BTC), null when it has none. */
export const PriceCandleSchema = z.object({
  date: Day,
  open: z.number(),
  high: z.number(),
  low: z.number(),
  close: z.number(),
  volume: z.number().nullable(),
});

/** A change of the signal level inside the charted window (the chart's markers): the day and the new and previous level. */
export const PriceSignalChangeSchema = z.object({ date: Day, signal: SignalLevel, previous_signal: SignalLevel.nullable() });

/**
 * `data` of GET /prices/{asset}: the daily candles of the `days` days ending at the as-of
 * day, oldest first, as the market data provider has them (a day the source lacks is absent,
 * never filled), with the signal level in effect at the window's first candle and the level
 * changes inside the window (dates and levels only; scores and factor snapshots are the
 * tier-gated signal history's).
 */
export const PricesDataSchema = z.object({
  asset: z.string().describe('Asset id (CoinGecko)'),
  symbol: z.string(),
  days: z.number().int().describe('Window length asked for, in days, ending at the as-of day'),
  as_of: Day.describe('Day of the newest candle'),
  source: z.string().describe('Where the candles come from'),
  candles: z.array(PriceCandleSchema).describe('Oldest first; days the source lacks are absent'),
  signal_at_start: SignalLevel.nullable().describe("Signal level in effect on the first candle's day; null before the signal has data"),
  signal_changes: z.array(PriceSignalChangeSchema).describe('Signal level changes inside the window, oldest first'),
  ...Stale,
});

/** Types of the schemas above. */
export type SignalEntry = z.infer<typeof SignalEntrySchema>;
export type SignalsData = z.infer<typeof SignalsDataSchema>;
export type RegimeData = z.infer<typeof RegimeDataSchema>;
export type ChainHealthData = z.infer<typeof ChainHealthSchema>;
export type ChainMetricsData = z.infer<typeof ChainMetricsSchema>;
export type AssetsData = z.infer<typeof AssetsDataSchema>;
export type HistoryData = z.infer<typeof HistoryDataSchema>;
export type HistoryEntry = z.infer<typeof HistoryEntrySchema>;
export type StatusData = z.infer<typeof StatusDataSchema>;
export type PricesData = z.infer<typeof PricesDataSchema>;
