/**
 * Types shared by the pure engine (src/engine) and its callers.
 *
 * Conventions: dates are ISO calendar days `YYYY-MM-DD` in UTC (a daily value is stamped
 * at the candle's 00:00 UTC open); prices are USD; percentages are in percent (5 = 5 %);
 * funding rates are fractions per 8 hours (0.0001 = 0.01 % per 8 h).
 */

/** One daily OHLCV candle. `volume` is in base units, `null` where the source did not store it. */
export interface Candle {
  date: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number | null;
}

/** One daily Crypto Fear & Greed Index value (alternative.me), 0..100, with the source's own label. */
export interface FearGreedPoint {
  date: string;
  value: number;
  classification: string;
}

/** One daily funding-rate value: the mean of that UTC day's prints, as a fraction per 8 h. */
export interface FundingPoint {
  date: string;
  rate: number;
}

/** A dated value of one chain metric (USD, counts, ... as named by the metric). */
export interface MetricPoint {
  date: string;
  value: number;
}

/** The five signal levels, strongest buy first (the scale of TradingView's technical ratings). */
export const SIGNAL_LEVELS = ['strong_buy', 'buy', 'neutral', 'sell', 'strong_sell'] as const;
/** Five-level signal on the scale of TradingView's technical ratings. */
export type SignalLevel = (typeof SIGNAL_LEVELS)[number];

/** BTC market regimes. */
export const REGIME_LEVELS = ['bull', 'bear', 'neutral'] as const;
/** BTC market regime. */
export type RegimeLevel = (typeof REGIME_LEVELS)[number];

/** Names of the factors a signal may be built from (docs/methodology.md, "Signal"). */
export const FACTOR_NAMES = ['trend', 'momentum', 'rsi', 'fear_greed', 'funding_rate', 'chain_health', 'regime'] as const;
/** Names of the factors a signal may be built from. */
export type FactorName = (typeof FACTOR_NAMES)[number];

/**
 * One factor of a signal. `score` is in [-1, 1] (positive = bullish), `weight` in [0, 1]
 * (the weights of the factors present sum to 1), `contribution = weight * score`, and the
 * contributions of all factors sum to the signal's `score`.
 */
export interface Factor {
  name: FactorName;
  /** The raw input the factor scored (e.g. RSI value, % above SMA-200), in `unit`. */
  value: number | string;
  unit: string;
  score: number;
  weight: number;
  contribution: number;
  explanation: string;
  /** Where the input came from (dataset file / provider and method). */
  source: string;
  /** Date of the newest input the factor used. */
  as_of: string;
}

/** A factor the model would use but that has no data for this asset at this date. */
export interface MissingFactor {
  name: FactorName;
  reason: string;
}

/** A computed signal for one asset at one as-of date. */
export interface SignalResult {
  signal: SignalLevel;
  /** Composite score in [-1, 1]; equals the sum of factor contributions. */
  score: number;
  /** 0..1 */
  confidence: number;
  factors: Factor[];
  missing_factors: MissingFactor[];
  /** Why the reported level is what it is, given the score (bands, hysteresis, confirmation, volatility gate). */
  level_rule: LevelRule;
  as_of: string;
}

/** What decided a signal's level (src/engine/signal.ts; docs/methodology.md, "Signal model v4" and "Signal model v3"). */
export const LEVEL_REASONS = ['band', 'hysteresis', 'confirmation', 'volatility_gate'] as const;
export type LevelReason = (typeof LEVEL_REASONS)[number];

/**
 * Why a signal reads the level it reads. The score's band alone gives `score_level`; the
 * reported level can differ from it for one reason, `reason`:
 * - `band`: it does not differ;
 * - `hysteresis`: the score left the reported level's band by less than the model's margin, so the level is kept;
 * - `confirmation`: a change of level waits for its confirmation days (`pending`);
 * - `volatility_gate`: buys are held at neutral while the downside-volatility gate is closed (v3).
 */
export interface LevelRule {
  /** The level of the score's band (the model's bands), before hysteresis, confirmation and the gate. */
  score_level: SignalLevel;
  reason: LevelReason;
  /** The model's bands: |score| above `buy` is buy/sell, above `strong` strong_buy/strong_sell. */
  bands: { buy: number; strong: number };
  /**
   * The downside-volatility gate on buys (model v3), null when the model has none: `open`
   * false holds buys at neutral; `downside_ratio` = downside semideviation of daily returns over
   * the last `short_days` / the same over the last `long_days` (null with too few returns: the
   * gate is then open); the gate closes above `max`.
   */
  volatility_gate: { open: boolean; downside_ratio: number | null; max: number; short_days: number; long_days: number } | null;
  /** A change of level waiting for confirmation: the level, the consecutive days seen so far and the days needed; null when none. */
  pending: { signal: SignalLevel; days: number; needed: number } | null;
  /** One sentence saying the above for a reader. */
  explanation: string;
}

/** RSI-14 zones: below 30 oversold, above 70 overbought (Wilder). */
export const RSI_STATES = ['oversold', 'neutral', 'overbought'] as const;
export type RsiState = (typeof RSI_STATES)[number];
/** Momentum of the 30-day return and the price against its SMA-200. */
export const MOMENTUM_STATES = ['positive', 'neutral', 'negative'] as const;
export type MomentumState = (typeof MOMENTUM_STATES)[number];
/** Funding-rate zones (fraction per 8 h; thresholds in docs/methodology.md). */
export const FUNDING_STATES = ['negative', 'neutral', 'elevated', 'extreme'] as const;
export type FundingState = (typeof FUNDING_STATES)[number];

/** Conditions of the BTC regime as of one date; a condition is null where its data is missing. */
export interface RegimeConditions {
  rsi: { value: number; period: number; state: RsiState; as_of: string } | null;
  fear_greed: { value: number; classification: string; as_of: string } | null;
  momentum: {
    return_30d_pct: number;
    price_vs_sma_200_pct: number;
    state: MomentumState;
    as_of: string;
  } | null;
  funding_rate: {
    value: number;
    annualized_pct: number;
    state: FundingState;
    as_of: string;
  } | null;
}

/** The BTC regime on one date (after hysteresis). */
export interface RegimeResult {
  regime: RegimeLevel;
  /** Raw (unconfirmed) composite in [-1, 1]. */
  score: number;
  confidence: number;
  /** Date the current regime value was confirmed / began. */
  since: string;
  as_of: string;
  conditions: RegimeConditions;
}

/** Chains with health scores and metrics: Ethereum, Solana, Hyperliquid. */
export const CHAIN_IDS = ['eth', 'sol', 'hype'] as const;
export type ChainId = (typeof CHAIN_IDS)[number];
/** Chain health statuses, strongest first; `insufficient_data` when no metric is fresh. */
export const CHAIN_STATUSES = ['strong', 'healthy', 'neutral', 'weak', 'critical', 'insufficient_data'] as const;
export type ChainStatus = (typeof CHAIN_STATUSES)[number];

/** One metric's part in a chain health score. */
export interface ChainHealthComponent {
  metric: string;
  /** Recent 7-day mean of the metric. */
  value: number;
  z_score: number;
  weight: number;
  contribution: number;
  as_of: string;
}

/** Chain health on one date. `score` 0..100 (50 = normal); null when no metric has fresh data. */
export interface ChainHealthResult {
  chain: ChainId;
  score: number | null;
  status: ChainStatus;
  z_score: number | null;
  regime: RegimeLevel;
  sensitivity: number;
  components: ChainHealthComponent[];
  /** Metrics the model uses that have no fresh data at this date, with the date of their last value. */
  missing_metrics: { metric: string; last_date: string | null; reason: string }[];
  window_days: number;
  /** Date of the newest metric value used (null when none). */
  as_of: string | null;
  /** The evaluation date this result is for (added: look results up by this, not by `as_of`). */
  date: string;
}

/**
 * Kinds of market series (docs/live-data.md): daily candles per asset, the Fear & Greed
 * index, daily funding-rate means per asset, daily chain metrics per chain and metric.
 */
export const SERIES_KINDS = ['candles', 'fear_greed', 'funding', 'metric'] as const;
export type SeriesKind = (typeof SERIES_KINDS)[number];

/**
 * The points of one series, each with the venue, file or API it came from (`source`).
 * Funding rates are daily means as the fraction per 8 hours; `interval_hours` is the
 * venue's funding interval and `prints` the number of prints averaged (null when unknown).
 */
export type SourcedPoints =
  | { kind: 'candles'; points: (Candle & { source: string })[] }
  | { kind: 'fear_greed'; points: (FearGreedPoint & { source: string })[] }
  | { kind: 'funding'; points: (FundingPoint & { interval_hours: number | null; prints: number | null; source: string })[] }
  | { kind: 'metric'; points: (MetricPoint & { source: string })[] };
