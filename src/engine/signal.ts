/**
 * Explained trading signal per asset and day, causal.
 *
 * Method (docs/methodology.md, "Signal"): up to seven factors, each scored in [-1, 1]
 * (positive = bullish), are combined with base weights ({@link SIGNAL_WEIGHTS}); factors
 * without data are listed in `missing_factors` and the weights of the present ones are
 * renormalized to sum to 1. Stored numbers are rounded to 4 decimals and the score is the sum
 * of the rounded contributions, so the factors reproduce it exactly. The level uses
 * TradingView's technical-rating bands.
 */
import { returnOverCalendarDays, rsiWilder, sma } from './indicators.ts';
import { fundingState, MOMENTUM_DAYS, RSI_PERIOD, SMA_LONG } from './regime.ts';
import type {
  Candle,
  ChainHealthResult,
  Factor,
  FactorName,
  FearGreedPoint,
  FundingPoint,
  LevelRule,
  MissingFactor,
  RegimeResult,
  SignalLevel,
  SignalResult,
} from './types.ts';
import { SIGNAL_LEVELS } from './types.ts';
import { addDays, assertAscending, clamp, dayNumber, normalizeWeights, round } from './util.ts';

/** Base factor weights (sum 1). For assets without a chain, chain_health is not applicable. */
export const SIGNAL_WEIGHTS: Readonly<Record<FactorName, number>> = {
  trend: 0.25,
  momentum: 0.2,
  rsi: 0.15,
  fear_greed: 0.1,
  funding_rate: 0.1,
  chain_health: 0.1,
  regime: 0.1,
};
/** Order in which factors are reported. */
export const FACTOR_ORDER: readonly FactorName[] = ['trend', 'momentum', 'rsi', 'fear_greed', 'funding_rate', 'chain_health', 'regime'];
/** Short trend average (days). */
export const SMA_SHORT = 50;
/** Realized-volatility window for the momentum factor: daily returns in the last 90 days. */
export const VOL_WINDOW_DAYS = 90;
/** Minimum daily returns in that window. */
export const VOL_MIN_RETURNS = 60;
/** Fear & Greed, funding, regime and chain-health inputs older than this many days are not used. */
export const SIGNAL_STALENESS_DAYS = 3;
/** Funding baseline (fraction per 8 h): Binance's default rate, scored 0. */
export const FUNDING_BASELINE = 0.0001;
/** Funding distance from the baseline that scores ±1 (0.05 %/8 h is an extreme crowding level). */
export const FUNDING_SCALE = 0.0004;

/**
 * A signal model: which factors with which weights, how each is scored, and how the score
 * becomes a level. Models are named by `version`; stored history rows carry it.
 */
export interface SignalModel {
  /** Version string stored with every history row (e.g. 'signals-v2'). */
  version: string;
  /** Base weights (sum 1); a factor with weight 0 is not part of the model. */
  weights: Readonly<Record<FactorName, number>>;
  /** 'v1': the original readings; 'v2': volatility-normalised trend and momentum, contrarian readings only at extremes. */
  scoring: 'v1' | 'v2';
  /** |score| above which the level is buy/sell, and strong_buy/strong_sell. */
  bands: { buy: number; strong: number };
  /** Score margin beyond a band edge needed to leave the current level (hysteresis); 0 = none. */
  margin: number;
  /** Consecutive days a new level must hold before it is reported (confirmation); 1 = none. */
  confirmDays: number;
  /** Horizons (calendar days) of the time-series momentum factor (v2 scoring). */
  momentumDays: readonly number[];
  /**
   * Asymmetric confirmation (v3): a change that lowers the conviction of a reported buy or sell
   * level (strong_buy -> buy, buy -> neutral or lower; strong_sell -> sell, sell -> neutral or
   * higher) is reported at once; every other change still needs `confirmDays`. Default false.
   */
  exitAtOnce?: boolean;
  /**
   * Downside-volatility regime gate on buys (v3), or null/absent for none: while the asset's
   * downside semideviation of daily returns over the last `shortDays` exceeds `max` times that
   * over the last `longDays`, buy and strong_buy are capped at neutral. When either window has
   * too few returns the gate is open (missing data never blocks, as a missing factor never
   * counts). The score and factors are unchanged.
   */
  volGate?: VolGate | null;
  /**
   * Start neutral (v4): before an asset's first day the level counts as neutral, so its first
   * buy or sell level needs `confirmDays` like every other entry. Without it (v1-v3) the first
   * day's level is the band of its score, reported unconfirmed. Default false.
   */
  startNeutral?: boolean;
}

/** Parameters of {@link SignalModel.volGate} (windows in calendar days, `max` a ratio). */
export interface VolGate {
  shortDays: number;
  longDays: number;
  max: number;
}

/** The original model (TradingView bands, no confirmation, contrarian RSI / Fear & Greed / funding). */
export const MODEL_V1: SignalModel = {
  version: 'signals-v1',
  weights: SIGNAL_WEIGHTS,
  scoring: 'v1',
  bands: { buy: 0.1, strong: 0.5 },
  margin: 0,
  confirmDays: 1,
  momentumDays: [MOMENTUM_DAYS],
};

/**
 * Weights of model v2 (sum 1), from the single-factor walk-forward evidence
 * (docs/methodology.md, "Signal model v2"): the BTC regime (a trend filter on BTC), Fear &
 * Greed read with the trend, contrarian funding and chain health carry the weight; the
 * asset's own 30-day time-series momentum and oversold RSI add to it; the asset's own SMA
 * distance is dropped (no out-of-sample information beyond the regime and momentum).
 */
export const SIGNAL_WEIGHTS_V2: Readonly<Record<FactorName, number>> = {
  trend: 0,
  momentum: 0.1,
  rsi: 0.1,
  fear_greed: 0.25,
  funding_rate: 0.25,
  chain_health: 0.1,
  regime: 0.2,
};

/**
 * The walk-forward parameter grid of model v2: the level bands (how strong a score must be
 * to call buy/sell and strong_buy/strong_sell). Everything else is fixed. For each scored
 * year the backtest picks the entry with the best pooled long/short Sharpe on the data
 * before that year (src/services/backtest.ts).
 */
export const MODEL_V2_GRID: readonly SignalModel['bands'][] = [
  { buy: 0.25, strong: 0.5 },
  { buy: 0.3, strong: 0.55 },
  { buy: 0.35, strong: 0.6 },
];

/** Model v2 with the given bands (an entry of {@link MODEL_V2_GRID}). */
export function modelV2(bands: SignalModel['bands']): SignalModel {
  return {
    version: 'signals-v2',
    weights: SIGNAL_WEIGHTS_V2,
    scoring: 'v2',
    bands,
    margin: 0.05,
    confirmDays: 3,
    momentumDays: [30],
  };
}

/**
 * Model v2 as served: the bands the walk-forward rule picks on all the data before
 * {@link MODEL_V2_LIVE_FROM} (checked by test/services/backtest.test.ts).
 */
export const MODEL_V2: SignalModel = modelV2({ buy: 0.3, strong: 0.55 });
/** First day model v2 was not fitted on: the live track record starts here. */
export const MODEL_V2_LIVE_FROM = '2025-10-01';

/**
 * The volatility regime of model v3: downside semideviation of daily returns over the last 90
 * days (the momentum factor's volatility window) against the last 365 days (one year); buys
 * need the recent downside risk at or below the year's (ratio <= 1). Not tuned: 1 is "no more
 * downside risk than usual" (docs/methodology.md, "Signal model v3").
 */
export const V3_VOL_GATE: VolGate = { shortDays: VOL_WINDOW_DAYS, longDays: 365, max: 1 };
/** Minimum daily returns in the long window of the volatility gate (two thirds, as 60 of 90). */
export const VOL_GATE_MIN_LONG_RETURNS = 240;

/** The walk-forward grid of model v3: v2's level bands ({@link MODEL_V2_GRID}). */
export const MODEL_V3_GRID: readonly SignalModel['bands'][] = MODEL_V2_GRID;

/**
 * Model v3 with the given bands: v2's factors, weights, hysteresis and 3-day entry
 * confirmation, plus asymmetric confirmation (exits from a buy or sell level at once) and the
 * downside-volatility regime gate on buys ({@link V3_VOL_GATE}).
 */
export function modelV3(bands: SignalModel['bands']): SignalModel {
  return { ...modelV2(bands), version: 'signals-v3', exitAtOnce: true, volGate: V3_VOL_GATE };
}

/**
 * Model v3 as served: the bands the walk-forward rule picks on all the data before
 * {@link MODEL_V3_LIVE_FROM} (checked by test/services/backtest.test.ts).
 */
export const MODEL_V3: SignalModel = modelV3({ buy: 0.3, strong: 0.55 });
/** First day model v3 was not fitted on: the live track record starts here. */
export const MODEL_V3_LIVE_FROM = '2025-10-01';

/** The walk-forward grid of model v4: v3's ({@link MODEL_V3_GRID}). */
export const MODEL_V4_GRID: readonly SignalModel['bands'][] = MODEL_V3_GRID;

/**
 * Model v4 with the given bands: v3 with {@link SignalModel.startNeutral}, so that an asset's
 * first level, like every later one, needs the 3-day entry confirmation (v3 reported the
 * band of the first day's score at once: HYPE's strong_buy on its first day, 2024-12-05).
 */
export function modelV4(bands: SignalModel['bands']): SignalModel {
  return { ...modelV3(bands), version: 'signals-v4', startNeutral: true };
}

/**
 * Model v4 as served: the bands the walk-forward rule picks on all the data before
 * {@link MODEL_V4_LIVE_FROM} (checked by test/services/backtest.test.ts).
 */
export const MODEL_V4: SignalModel = modelV4({ buy: 0.3, strong: 0.55 });
/** First day model v4 was not fitted on: the live track record starts here. */
export const MODEL_V4_LIVE_FROM = '2025-10-01';

/** The model the service serves. */
export const CURRENT_MODEL: SignalModel = MODEL_V4;
/** First day the served model was not fitted on. */
export const CURRENT_LIVE_FROM = MODEL_V4_LIVE_FROM;

/**
 * Five-level signal from a score in [-1, 1], with TradingView's technical-rating bands:
 * strong_buy > 0.5, buy > 0.1, neutral in [-0.1, 0.1], sell < -0.1, strong_sell < -0.5.
 */
export function signalLevel(score: number, bands: SignalModel['bands'] = MODEL_V1.bands): SignalLevel {
  if (score > bands.strong) return 'strong_buy';
  if (score > bands.buy) return 'buy';
  if (score >= -bands.buy) return 'neutral';
  if (score >= -bands.strong) return 'sell';
  return 'strong_sell';
}

/** Rank of a level on the scale strong_sell (-2) .. strong_buy (+2). */
const LEVEL_RANK: Record<SignalLevel, number> = { strong_sell: -2, sell: -1, neutral: 0, buy: 1, strong_buy: 2 };

/**
 * The level a score points to given the level currently reported (hysteresis): the score
 * must pass the current level's band edge by `margin` to leave it; it then gets the level of
 * the band it is in.
 */
export function levelWithHysteresis(score: number, current: SignalLevel, model: Pick<SignalModel, 'bands' | 'margin'>): SignalLevel {
  const raw = signalLevel(score, model.bands);
  if (raw === current || model.margin <= 0) return raw;
  const shifted = signalLevel(LEVEL_RANK[raw] > LEVEL_RANK[current] ? score - model.margin : score + model.margin, model.bands);
  return shifted === current ? current : raw;
}

/**
 * Whether moving from `current` to `proposed` lowers the conviction of a reported buy or sell
 * level (toward neutral or past it): the changes model v3 reports at once.
 */
export function lowersConviction(current: SignalLevel, proposed: SignalLevel): boolean {
  const c = LEVEL_RANK[current];
  const p = LEVEL_RANK[proposed];
  return (c > 0 && p < c) || (c < 0 && p > c);
}

/** Factor scoring functions (pure, documented in docs/methodology.md). */
export const factorScores = {
  /** Price vs SMA-50 (%) and SMA-200 (%): 0.5*tanh(p50/10) + 0.5*tanh(p200/20). */
  trend: (p50: number, p200: number) => 0.5 * Math.tanh(p50 / 10) + 0.5 * Math.tanh(p200 / 20),
  /** 30-day return (%) over 30-day volatility (%): tanh(z / 2). */
  momentum: (ret30: number, vol30: number) => (vol30 > 0 ? Math.tanh(ret30 / vol30 / 2) : 0),
  /** Mean reversion: (50 - RSI) / 30, clipped (RSI 20 -> +1, 80 -> -1). */
  rsi: (rsi: number) => clamp((50 - rsi) / 30, -1, 1),
  /** Contrarian: (50 - F&G) / 50 (extreme fear bullish). */
  fear_greed: (v: number) => clamp((50 - v) / 50, -1, 1),
  /** Contrarian: (0.0001 - rate) / 0.0004, clipped (crowded longs bearish). */
  funding_rate: (rate: number) => clamp((FUNDING_BASELINE - rate) / FUNDING_SCALE, -1, 1),
  /** (score - 50) / 50. */
  chain_health: (score: number) => clamp((score - 50) / 50, -1, 1),
  /** The BTC regime's raw score, as is. */
  regime: (score: number) => clamp(score, -1, 1),
};

/**
 * Factor scoring of model v2 (docs/methodology.md, "Signal model v2"). Moves are measured in
 * units of the asset's own daily volatility `sd` (fraction), so a 10 % move means less for
 * DOGE than for BTC.
 */
export const factorScoresV2 = {
  /**
   * Trend filter: for n = 50 and 200, z = ln(close / SMA-n) / (sd * sqrt(n / 3)) (the spread of
   * the distance to an n-day mean under a random walk); score = mean of tanh(z).
   */
  trend: (close: number, sma50: number, sma200: number, sd: number) =>
    0.5 * Math.tanh(Math.log(close / sma50) / (sd * Math.sqrt(50 / 3))) +
    0.5 * Math.tanh(Math.log(close / sma200) / (sd * Math.sqrt(200 / 3))),
  /**
   * Time-series momentum (Moskowitz, Ooi & Pedersen 2012; Liu & Tsyvinski 2021): the mean over
   * the horizons h of tanh(ln(1 + r_h) / (sd * sqrt(h))), the h-day return in standard deviations.
   */
  momentum: (retsPct: readonly number[], horizons: readonly number[], sd: number) => {
    let s = 0;
    for (let k = 0; k < horizons.length; k++) s += Math.tanh(Math.log(1 + retsPct[k]! / 100) / (sd * Math.sqrt(horizons[k]!)));
    return s / horizons.length;
  },
  /** Contrarian only when oversold (Wilder's 30): (30 - RSI) / 15 clipped to [0, 1], so RSI 15 scores +1; 0 from 30 up. */
  rsi: (rsi: number) => (rsi < 30 ? clamp((30 - rsi) / 15, 0, 1) : 0),
  /** Read with the trend (as the BTC regime reads it): (value - 50) / 50, greed bullish, fear bearish. */
  fear_greed: (v: number) => clamp((v - 50) / 50, -1, 1),
};

/**
 * `x` with `d` decimals (half away from zero) and thousands separators. Hand-rolled on
 * integer strings: Intl and toFixed are several times slower and this runs for every factor
 * of every day of a whole history.
 */
function fmt(x: number, d = 2): string {
  const f = d === 2 ? 100 : d === 4 ? 10000 : 10 ** d;
  const n = Math.round(Math.abs(x) * f);
  if (!Number.isSafeInteger(n)) return x.toFixed(d);
  let digits = String(n);
  if (digits.length <= d) digits = '0'.repeat(d - digits.length + 1) + digits;
  const int = digits.slice(0, digits.length - d);
  let grouped = int;
  if (int.length > 3) {
    grouped = '';
    for (let i = 0; i < int.length; i++) {
      if (i > 0 && (int.length - i) % 3 === 0) grouped += ',';
      grouped += int[i];
    }
  }
  return (x < 0 && n !== 0 ? '-' : '') + grouped + (d > 0 ? '.' + digits.slice(digits.length - d) : '');
}
const pct = (x: number) => `${x >= 0 ? '+' : ''}${fmt(x)}%`;

/** Input of {@link computeSignalSeries}. */
export interface SignalInput {
  /** Canonical asset id (for messages). */
  asset: string;
  /** Daily candles of the asset, strictly ascending by date. */
  candles: Candle[];
  /** alternative.me Fear & Greed, ascending. */
  fearGreed: FearGreedPoint[];
  /** Daily mean funding (fraction per 8 h), ascending; null when the asset has no funding history. */
  funding: FundingPoint[] | null;
  /** BTC regime series (computeRegimeSeries), ascending by as_of. */
  regime: RegimeResult[];
  /** Chain health of the asset's chain (computeChainHealthSeries), ascending by `date`; null for assets without a chain. */
  chainHealth: ChainHealthResult[] | null;
  /** Provenance strings copied into each factor's `source`. */
  sources: { prices: string; fear_greed: string; funding: string | null; chain_health: string | null };
}

/** Everything one day's factors are built from (inputs already selected point-in-time). */
interface DayContext {
  i: number;
  date: string;
  close: number;
  sma50: number | null;
  sma200: number | null;
  rsi: number | null;
  ret30: number | null;
  vol30: number | null;
  volN: number;
  /** Daily volatility (fraction) of the last 90 days' returns; null when not warm. */
  sd: number | null;
  /** Returns (%) over the model's momentum horizons; null entries when a base day is missing. */
  mom: (number | null)[];
  fg: FearGreedPoint | null;
  fgFresh: boolean;
  fr: FundingPoint | null;
  frFresh: boolean;
  rg: RegimeResult | null;
  rgFresh: boolean;
  h: ChainHealthResult | null;
  hFresh: boolean;
}

/** Raw score of a factor on one day, or null when the factor has no usable data. */
function factorRawScore(name: FactorName, x: DayContext, model: SignalModel): number | null {
  if (model.scoring === 'v2') {
    switch (name) {
      case 'trend':
        return x.sma50 !== null && x.sma200 !== null && x.sma50 > 0 && x.sma200 > 0 && x.sd !== null && x.sd > 0
          ? factorScoresV2.trend(x.close, x.sma50, x.sma200, x.sd)
          : null;
      case 'momentum':
        return x.sd !== null && x.sd > 0 && x.mom.every((m) => m !== null)
          ? factorScoresV2.momentum(x.mom as number[], model.momentumDays, x.sd)
          : null;
      case 'rsi':
        return x.rsi !== null ? factorScoresV2.rsi(x.rsi) : null;
      case 'fear_greed':
        return x.fg && x.fgFresh ? factorScoresV2.fear_greed(x.fg.value) : null;
      default:
        break;
    }
  }
  switch (name) {
    case 'trend':
      return x.sma50 !== null && x.sma200 !== null && x.sma50 > 0 && x.sma200 > 0
        ? factorScores.trend((x.close / x.sma50 - 1) * 100, (x.close / x.sma200 - 1) * 100)
        : null;
    case 'momentum':
      return x.ret30 !== null && x.vol30 !== null && x.vol30 > 0 ? factorScores.momentum(x.ret30, x.vol30) : null;
    case 'rsi':
      return x.rsi !== null ? factorScores.rsi(x.rsi) : null;
    case 'fear_greed':
      return x.fg && x.fgFresh ? factorScores.fear_greed(x.fg.value) : null;
    case 'funding_rate':
      return x.fr && x.frFresh ? factorScores.funding_rate(x.fr.rate) : null;
    case 'chain_health':
      return x.h && x.hFresh && x.h.score !== null ? factorScores.chain_health(x.h.score) : null;
    case 'regime':
      return x.rg && x.rgFresh ? factorScores.regime(x.rg.score) : null;
  }
}

/** Per-series constants used when a day's factors are described. */
interface SeriesContext {
  asset: string;
  sources: SignalInput['sources'];
  /** Factor `source` strings, built once per series. */
  src: Record<FactorName, string>;
  /** Whether the caller passed a funding series at all (null = the asset has no funding source). */
  hasFunding: boolean;
  model: SignalModel;
}

/** The full factor entry of a present factor (score, weight and contribution already rounded). */
function describeFactor(name: FactorName, x: DayContext, score: number, weight: number, contribution: number, sc: SeriesContext): Factor {
  const ss = fmt(score, 4);
  if (sc.model.scoring === 'v2') {
    const sdPct = x.sd !== null ? x.sd * 100 : 0;
    const f = (value: number | string, unit: string, explanation: string, asOf = x.date): Factor => ({
      name,
      value,
      unit,
      score,
      weight,
      contribution,
      explanation,
      source: sc.src[name],
      as_of: asOf,
    });
    switch (name) {
      case 'momentum': {
        const h = sc.model.momentumDays;
        const parts = h.map((d, k) => `${d}-day return ${pct(x.mom[k]!)}`).join(', ');
        return f(
          round(x.mom[0]!, 2),
          `% over ${h[0]} days`,
          `${parts} against a daily volatility of ${fmt(sdPct)}%; time-series momentum score ${ss}.`,
        );
      }
      case 'rsi': {
        const rv = x.rsi!;
        return f(
          round(rv, 2),
          'RSI-14 (0..100)',
          `RSI-14 is ${fmt(rv)} (${rv < 30 ? 'oversold' : 'not oversold'}); read contrarian only when oversold (below 30), score ${ss}.`,
        );
      }
      case 'fear_greed': {
        const fg = x.fg!;
        return f(
          fg.value,
          'index 0..100',
          `Crypto Fear & Greed is ${fg.value} (${fg.classification}) on ${fg.date}; read with the trend (greed bullish, fear bearish), score ${ss}.`,
          fg.date,
        );
      }
      case 'trend': {
        const p50 = (x.close / x.sma50! - 1) * 100;
        const p200 = (x.close / x.sma200! - 1) * 100;
        return f(
          round(p200, 2),
          '% vs SMA-200',
          `Close ${fmt(x.close)} is ${pct(p50)} vs its 50-day SMA (${fmt(x.sma50!)}) and ${pct(p200)} vs its 200-day SMA (${fmt(x.sma200!)}), with a daily volatility of ${fmt(sdPct)}%; volatility-normalised trend score ${ss}.`,
        );
      }
      default:
        break;
    }
  }
  switch (name) {
    case 'trend': {
      const p50 = (x.close / x.sma50! - 1) * 100;
      const p200 = (x.close / x.sma200! - 1) * 100;
      return {
        name,
        value: round(p200, 2),
        unit: '% vs SMA-200',
        score,
        weight,
        contribution,
        explanation: `Close ${fmt(x.close)} is ${pct(p50)} vs its 50-day SMA (${fmt(x.sma50!)}) and ${pct(p200)} vs its 200-day SMA (${fmt(x.sma200!)}), trend score ${ss}.`,
        source: sc.src.trend,
        as_of: x.date,
      };
    }
    case 'momentum':
      return {
        name,
        value: round(x.ret30!, 2),
        unit: '% over 30 days',
        score,
        weight,
        contribution,
        explanation: `30-day return ${pct(x.ret30!)} against a 30-day volatility of ${fmt(x.vol30!)}% (${fmt(x.ret30! / x.vol30!)} sigma), momentum score ${ss}.`,
        source: sc.src.momentum,
        as_of: x.date,
      };
    case 'rsi': {
      const rv = x.rsi!;
      return {
        name,
        value: round(rv, 2),
        unit: 'RSI-14 (0..100)',
        score,
        weight,
        contribution,
        explanation: `RSI-14 is ${fmt(rv)} (${rv < 30 ? 'oversold' : rv > 70 ? 'overbought' : 'neutral band 30-70'}); read as mean reversion, score ${ss}.`,
        source: sc.src.rsi,
        as_of: x.date,
      };
    }
    case 'fear_greed': {
      const fg = x.fg!;
      return {
        name,
        value: fg.value,
        unit: 'index 0..100',
        score,
        weight,
        contribution,
        explanation: `Crypto Fear & Greed is ${fg.value} (${fg.classification}) on ${fg.date}; read contrarian, score ${ss}.`,
        source: sc.src.fear_greed,
        as_of: fg.date,
      };
    }
    case 'funding_rate': {
      const fr = x.fr!;
      return {
        name,
        value: fr.rate,
        unit: 'fraction per 8 h',
        score,
        weight,
        contribution,
        explanation: `Perpetual funding averaged ${fmt(fr.rate * 100, 4)}% per 8 h on ${fr.date} (${fmt(fr.rate * 3 * 365 * 100)}% annualized, ${fundingState(fr.rate)}); read contrarian against the 0.01% default, score ${ss}.`,
        source: sc.src.funding_rate,
        as_of: fr.date,
      };
    }
    case 'chain_health': {
      const h = x.h!;
      return {
        name,
        value: h.score!,
        unit: 'score 0..100',
        score,
        weight,
        contribution,
        explanation: `Chain health of ${h.chain} is ${fmt(h.score!, 1)}/100 (${h.status}, composite z ${fmt(h.z_score ?? 0)}, metrics as of ${h.as_of}), score ${ss}.`,
        source: sc.src.chain_health,
        as_of: h.as_of ?? h.date,
      };
    }
    case 'regime': {
      const rg = x.rg!;
      return {
        name,
        value: rg.score,
        unit: 'score -1..1',
        score,
        weight,
        contribution,
        explanation: `BTC regime is ${rg.regime} since ${rg.since} with raw score ${fmt(rg.score, 4)} on ${rg.as_of}, score ${ss}.`,
        source: sc.src.regime,
        as_of: rg.as_of,
      };
    }
  }
}

/** Why a factor is missing on one day. */
function missingReason(name: FactorName, x: DayContext, sc: SeriesContext): string {
  const d = x.date;
  const stale = (what: string, from: string) => `newest ${what} is from ${from}, more than ${SIGNAL_STALENESS_DAYS} days before ${d}`;
  switch (name) {
    case 'trend':
      if (x.sma200 !== null && x.sd === null)
        return `needs ${VOL_MIN_RETURNS} daily returns in the last ${VOL_WINDOW_DAYS} days for volatility, ${x.volN} available`;
      return `needs ${SMA_LONG} daily closes for the 200-day SMA, ${x.i + 1} available`;
    case 'momentum':
      if (sc.model.scoring === 'v2') {
        const k = x.mom.findIndex((m) => m === null);
        if (k >= 0) return `no close dated ${addDays(d, -sc.model.momentumDays[k]!)} (${sc.model.momentumDays[k]} days before ${d})`;
        return `needs ${VOL_MIN_RETURNS} daily returns in the last ${VOL_WINDOW_DAYS} days for volatility, ${x.volN} available`;
      }
      return x.ret30 === null
        ? `no close dated ${addDays(d, -MOMENTUM_DAYS)} (30 days before ${d})`
        : `needs ${VOL_MIN_RETURNS} daily returns in the last ${VOL_WINDOW_DAYS} days for volatility, ${x.volN} available`;
    case 'rsi':
      return `needs ${RSI_PERIOD + 1} daily closes, ${x.i + 1} available`;
    case 'fear_greed':
      return x.fg ? `${stale('Fear & Greed value', x.fg.date)} (upstream gap)` : `no Fear & Greed value on or before ${d}`;
    case 'funding_rate':
      // Point-in-time wording: never reveal when (or whether) data appears after d.
      if (!sc.hasFunding) return `no funding-rate source for ${sc.asset}`;
      return x.fr ? stale('funding rate', x.fr.date) : `no funding-rate value for ${sc.asset} on or before ${d}`;
    case 'chain_health':
      if (x.h && x.hFresh) {
        const why = x.h.missing_metrics.map((m) => `${m.metric}: ${m.reason}`).join('; ');
        return `chain health of ${x.h.chain} has insufficient data on ${x.h.date} (${why})`;
      }
      return x.h ? stale('chain health', x.h.date) : `no chain health on or before ${d}`;
    case 'regime':
      return x.rg ? stale('BTC regime', x.rg.as_of) : `no BTC regime on or before ${d}`;
  }
}

/** What a day's factor list is built from (kept by the lazy properties). */
interface LazyFactors {
  x: DayContext;
  names: FactorName[];
  scores: number[];
  w: number[];
  contributions: number[];
}

function buildFactors(l: LazyFactors, sc: SeriesContext): Factor[] {
  const out = new Array<Factor>(l.names.length);
  for (let k = 0; k < l.names.length; k++) out[k] = describeFactor(l.names[k]!, l.x, l.scores[k]!, l.w[k]!, l.contributions[k]!, sc);
  return out;
}

function buildMissing(l: LazyFactors, sc: SeriesContext, applicable: readonly FactorName[]): MissingFactor[] {
  const out: MissingFactor[] = [];
  for (const name of applicable) if (!l.names.includes(name)) out.push({ name, reason: missingReason(name, l.x, sc) });
  return out;
}

/** The score interval of a level under `bands`, for explanations ("above 0.3", "from -0.3 to 0.3"). */
function bandText(l: SignalLevel, b: SignalModel['bands']): string {
  switch (l) {
    case 'strong_buy':
      return `above ${b.strong}`;
    case 'buy':
      return `above ${b.buy}`;
    case 'neutral':
      return `from ${-b.buy} to ${b.buy}`;
    case 'sell':
      return `below ${-b.buy}`;
    case 'strong_sell':
      return `below ${-b.strong}`;
  }
}

/**
 * Why a day's reported level is what it is (`SignalResult.level_rule`): the score's band, and
 * the one rule that moved the level from it, in this order of precedence: the volatility gate
 * holding a buy at neutral, a change waiting for confirmation, hysteresis keeping the level.
 * `s.pending` is the change still unconfirmed after this day (level and consecutive days).
 * `s.first` marks the series' first day (an asset's first day of data): its level is the
 * starting level, not one kept from an earlier day, and the explanation says so (a model with
 * `startNeutral` starts at neutral; the others at the band of the first score). The other
 * fields do not depend on it.
 */
export function levelRule(
  model: SignalModel,
  s: {
    score: number;
    level: SignalLevel;
    held: boolean;
    gateClosed: boolean;
    gateRatio: number | null;
    pending: { signal: SignalLevel; days: number } | null;
    first?: boolean;
  },
): LevelRule {
  const b = model.bands;
  const scoreLevel = signalLevel(s.score, b);
  const g = model.volGate ?? null;
  const gate = g
    ? {
        open: !s.gateClosed,
        downside_ratio: s.gateRatio === null ? null : round(s.gateRatio, 4),
        max: g.max,
        short_days: g.shortDays,
        long_days: g.longDays,
      }
    : null;
  const pending = s.pending ? { ...s.pending, needed: model.confirmDays } : null;
  const said = `Score ${s.score} is in the ${scoreLevel} band (${bandText(scoreLevel, b)})`;
  let reason: LevelRule['reason'];
  let explanation: string;
  // On the first day nothing is kept from an earlier day: the level is where the history starts.
  const starts = `the history starts at ${s.level}`;
  const gateText = (g: NonNullable<typeof gate>) =>
    `buys are held at neutral while the ${g.short_days}-day downside semideviation of daily returns is ` +
    `${g.downside_ratio}x the ${g.long_days}-day one (the gate closes above ${g.max}x).`;
  if (s.level === scoreLevel) {
    reason = 'band';
    explanation = s.first ? `${said}; ${starts}.` : `${said}.`;
  } else if (s.held && gate && LEVEL_RANK[s.level] <= 0) {
    reason = 'volatility_gate';
    explanation = s.first ? `${said}; ${starts}, and ${gateText(gate)}` : `${said}, but ${gateText(gate)}`;
  } else if (pending && pending.signal === scoreLevel) {
    reason = 'confirmation';
    const days = `${pending.needed} consecutive days (day ${pending.days} of ${pending.needed}).`;
    explanation = s.first
      ? `${said}; ${starts}, and ${pending.signal} takes over once it has held for ${days}`
      : `${said}; ${s.level} is kept until ${pending.signal} has held for ${days}`;
  } else {
    reason = 'hysteresis';
    const edge = `the score passes the band's edge by the margin of ${model.margin}.`;
    explanation = s.first ? `${said}; ${starts}, which holds until ${edge}` : `${said}; ${s.level} is kept until ${edge}`;
  }
  return { score_level: scoreLevel, reason, bands: { buy: b.buy, strong: b.strong }, volatility_gate: gate, pending, explanation };
}

/** Replaces a lazy accessor by a plain enumerable data property holding `value`; returns `value`. */
function settle<T>(target: object, key: string, value: T): T {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  return value;
}

/**
 * Computes the signal for every candle of one asset.
 *
 * @returns one {@link SignalResult} per candle, aligned with `input.candles`; result i uses only
 *   inputs dated <= candles[i].date. Chain health is looked up by its evaluation `date` (the
 *   newest result with date <= D, at most 3 days old); the regime by `as_of` likewise.
 *   Scores, weights and contributions are rounded to 4 decimals; `score` = sum of contributions.
 *   `confidence` = coverage (base weight present / base weight applicable) x agreement
 *   (|sum w*s| / sum w*|s|, 0 when every present score is 0).
 *   `factors`, `missing_factors` and `level_rule` are own enumerable accessor properties that
 *   build their value (with the explanation strings) on first read, from the day's inputs kept
 *   in typed arrays per series, and then turn into plain data properties, so spreading,
 *   JSON.stringify and deep equality see ordinary values; a whole history costs little until a
 *   day is inspected. The numbers are fixed at computation (the same in any order of reading),
 *   provided the inputs are not modified afterwards (the engine never does) and an entry's
 *   `as_of` is not changed: its day is found by `as_of` (RangeError if no candle has it).
 * @throws RangeError when an input series is not strictly ascending or has a bad date/value.
 */
export function computeSignalSeries(input: SignalInput, model: SignalModel = CURRENT_MODEL): SignalResult[] {
  const { asset, candles, fearGreed, regime, chainHealth, sources } = input;
  const funding = input.funding;
  assertAscending(candles, `${asset} candles`);
  assertAscending(fearGreed, 'fear & greed');
  if (funding) assertAscending(funding, `${asset} funding`);
  for (let k = 1; k < regime.length; k++) {
    if (!(regime[k - 1]!.as_of < regime[k]!.as_of)) throw new RangeError('regime series: as_of must be strictly ascending');
  }
  if (chainHealth) assertAscending(chainHealth, 'chain health series');

  const closes = candles.map((c) => c.close);
  const dn = candles.map((c) => dayNumber(c.date));
  const sma50 = sma(closes, SMA_SHORT);
  const sma200 = sma(closes, SMA_LONG);
  const rsi = rsiWilder(closes, RSI_PERIOD);
  const ret30 = returnOverCalendarDays(candles, MOMENTUM_DAYS);
  const momRets =
    model.scoring === 'v2' ? model.momentumDays.map((h) => (h === MOMENTUM_DAYS ? ret30 : returnOverCalendarDays(candles, h))) : [];
  // Day numbers of the side inputs, parsed once.
  const fgDn = fearGreed.map((p) => dayNumber(p.date));
  const frDn = funding ? funding.map((p) => dayNumber(p.date)) : [];
  const rgDn = regime.map((r) => dayNumber(r.as_of));
  const chDn = chainHealth ? chainHealth.map((r) => dayNumber(r.date)) : [];

  // Daily returns (%) between consecutive calendar days only; rolling sums over the last 90 days.
  const dailyRet: (number | null)[] = candles.map((c, i) =>
    i > 0 && dn[i]! - dn[i - 1]! === 1 && closes[i - 1]! !== 0 ? (c.close / closes[i - 1]! - 1) * 100 : null,
  );
  let volLo = 0;
  let volN = 0;
  let volS = 0;
  let volS2 = 0;
  // Volatility gate (v3): sums of squared negative returns (fractions) over the short and long windows.
  const gate = model.volGate ?? null;
  const gate2 = { sLo: 0, sN: 0, sD: 0, lLo: 0, lN: 0, lD: 0 };
  const down = (k: number): number => {
    const x = dailyRet[k];
    return x !== null && x !== undefined && x < 0 ? (x / 100) * (x / 100) : 0;
  };

  const weightsOf = model.weights;
  const applicable = FACTOR_ORDER.filter((f) => weightsOf[f] > 0 && (f !== 'chain_health' || chainHealth !== null));
  const applicableWeight = applicable.reduce((a, f) => a + weightsOf[f], 0);
  const sc: SeriesContext = {
    asset,
    sources,
    src: {
      trend: `${sources.prices}; SMA-50 and SMA-200 of daily closes`,
      momentum: `${sources.prices}; 30-day close-to-close return over realized volatility of daily returns (last ${VOL_WINDOW_DAYS} days) x sqrt(30)`,
      rsi: `${sources.prices}; Wilder RSI-14 of daily closes`,
      fear_greed: `${sources.fear_greed}; contrarian (50 - value) / 50`,
      funding_rate: `${sources.funding ?? 'funding'}; contrarian (0.0001 - rate) / 0.0004`,
      chain_health: `${sources.chain_health ?? 'chain health'}; (score - 50) / 50`,
      regime: 'BTC market regime (price vs SMA-200, 30-day return, RSI-14, Fear & Greed, funding; see /regime)',
    },
    hasFunding: funding !== null,
    model,
  };
  if (model.scoring === 'v2') {
    sc.src.trend = `${sources.prices}; ln(close / SMA-50) and ln(close / SMA-200) over daily volatility (last ${VOL_WINDOW_DAYS} days)`;
    sc.src.momentum = `${sources.prices}; ${model.momentumDays.join(', ')}-day log returns over daily volatility (last ${VOL_WINDOW_DAYS} days) x sqrt(horizon)`;
    sc.src.rsi = `${sources.prices}; Wilder RSI-14 of daily closes, contrarian below 30 only: (30 - RSI) / 15, clipped`;
    sc.src.fear_greed = `${sources.fear_greed}; read with the trend: (value - 50) / 50`;
  }
  // Per-day values the lazy properties rebuild a day from (index = day): the running
  // volatility, the side inputs' positions, the gate and the level rule's snapshot.
  const n = candles.length;
  const volNs = new Int32Array(n);
  /** sqrt of the sample variance of daily returns (%) over the last 90 days; NaN = not warm. */
  const volRoots = new Float64Array(n);
  const fgAt = new Int32Array(n);
  const frAt = new Int32Array(n);
  const rgAt = new Int32Array(n);
  const chAt = new Int32Array(n);
  const heldAt = new Uint8Array(n);
  const gateClosedAt = new Uint8Array(n);
  /** Downside semideviation ratio; NaN = too few returns (gate open). */
  const gateRatioAt = new Float64Array(n);
  /** Reported level and pending change (index into SIGNAL_LEVELS; -1 = none) and its days so far. */
  const levelAt = new Int8Array(n);
  const pendingAt = new Int8Array(n);
  const pendingDaysAt = new Int32Array(n);
  const scoreAt = new Float64Array(n);

  /** The inputs of day `i` as the factors read them (rebuilt the same way on demand). */
  const dayAt = (i: number): DayContext => {
    const c = candles[i]!;
    const today = dn[i]!;
    const root = volRoots[i]!;
    const warm = !Number.isNaN(root);
    const f = fgAt[i]!;
    const u = frAt[i]!;
    const g = rgAt[i]!;
    const h = chAt[i]!;
    return {
      i,
      date: c.date,
      close: c.close,
      sma50: sma50[i] ?? null,
      sma200: sma200[i] ?? null,
      rsi: rsi[i] ?? null,
      ret30: ret30[i] ?? null,
      vol30: warm ? root * Math.sqrt(MOMENTUM_DAYS) : null,
      volN: volNs[i]!,
      sd: warm ? root / 100 : null,
      mom: momRets.map((m) => m[i] ?? null),
      fg: f >= 0 ? fearGreed[f]! : null,
      fgFresh: f >= 0 && today - fgDn[f]! <= SIGNAL_STALENESS_DAYS,
      fr: u >= 0 ? funding![u]! : null,
      frFresh: u >= 0 && today - frDn[u]! <= SIGNAL_STALENESS_DAYS,
      rg: g >= 0 ? regime[g]! : null,
      rgFresh: g >= 0 && today - rgDn[g]! <= SIGNAL_STALENESS_DAYS,
      h: h >= 0 ? chainHealth![h]! : null,
      hFresh: h >= 0 && today - chDn[h]! <= SIGNAL_STALENESS_DAYS,
    };
  };
  // Renormalized weights per set of present factors (at most 2^7 sets), keyed by bit mask.
  const weightMemo = new Map<number, number[]>();
  /** The present factors of a day, their rounded scores, weights and contributions. */
  const factorsOf = (x: DayContext): LazyFactors => {
    const names: FactorName[] = [];
    const scores: number[] = [];
    let mask = 0;
    for (let k = 0; k < applicable.length; k++) {
      const name = applicable[k]!;
      const s = factorRawScore(name, x, model);
      if (s === null) continue;
      names.push(name);
      scores.push(round(s, 4));
      mask |= 1 << k;
    }
    let weights = weightMemo.get(mask);
    if (!weights) {
      weights =
        names.length > 0
          ? normalizeWeights(
              names.map((nm) => weightsOf[nm]),
              4,
            )
          : [];
      weightMemo.set(mask, weights);
    }
    const w = weights;
    return { x, names, scores, w, contributions: scores.map((s, k) => round(w[k]! * s, 4)) };
  };
  /** The factors of the day read last: `factors` then `missing_factors` of one entry rebuild it once. */
  let memoDay = -1;
  let memoFactors: LazyFactors | null = null;
  const factorsAt = (i: number): LazyFactors => {
    if (i !== memoDay || !memoFactors) {
      memoFactors = factorsOf(dayAt(i));
      memoDay = i;
    }
    return memoFactors;
  };
  /** The day of an entry of this series, by its `as_of` (binary search over the candles). */
  const indexOf = (entry: SignalResult): number => {
    let lo = 0;
    let hi = n - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const d = candles[mid]!.date;
      if (d === entry.as_of) return mid;
      if (d < entry.as_of) lo = mid + 1;
      else hi = mid - 1;
    }
    throw new RangeError(`${asset}: no day ${entry.as_of} in the series of this signal entry`);
  };
  // Factor entries (with their explanation strings) and the level rule are built when first
  // read: a whole history is mostly consumed for signal/score only, and building every
  // explanation eagerly costs most of the run time and ~70 MB for 11 assets. The accessors are
  // made once per series and shared by its entries, which keep nothing else: closures per
  // entry made a cold computation of the served series ~2x as long, mostly in the garbage
  // collector (docs/benchmarks.md, "Start-up").
  const lazyProperties: PropertyDescriptorMap = {
    factors: {
      get(this: SignalResult): Factor[] {
        return settle(this, 'factors', buildFactors(factorsAt(indexOf(this)), sc));
      },
      set(this: SignalResult, v: Factor[]) {
        settle(this, 'factors', v);
      },
      enumerable: true,
      configurable: true,
    },
    missing_factors: {
      get(this: SignalResult): MissingFactor[] {
        return settle(this, 'missing_factors', buildMissing(factorsAt(indexOf(this)), sc, applicable));
      },
      set(this: SignalResult, v: MissingFactor[]) {
        settle(this, 'missing_factors', v);
      },
      enumerable: true,
      configurable: true,
    },
    level_rule: {
      get(this: SignalResult): LevelRule {
        const i = indexOf(this);
        const ratio = gateRatioAt[i]!;
        const p = pendingAt[i]!;
        const rule = levelRule(model, {
          score: scoreAt[i]!,
          level: SIGNAL_LEVELS[levelAt[i]!]!,
          held: heldAt[i] === 1,
          gateClosed: gateClosedAt[i] === 1,
          gateRatio: Number.isNaN(ratio) ? null : ratio,
          pending: p < 0 ? null : { signal: SIGNAL_LEVELS[p]!, days: pendingDaysAt[i]! },
          first: i === 0,
        });
        return settle(this, 'level_rule', rule);
      },
      set(this: SignalResult, v: LevelRule) {
        settle(this, 'level_rule', v);
      },
      enumerable: true,
      configurable: true,
    },
  };

  let level: SignalLevel | null = null;
  let candidate: SignalLevel | null = null;
  let run = 0;
  let fg = -1;
  let fr = -1;
  let rg = -1;
  let ch = -1;

  const out: SignalResult[] = [];
  for (let i = 0; i < n; i++) {
    const c = candles[i]!;
    const today = dn[i]!;
    // Roll the volatility window: returns dated in (D - 90, D].
    const r = dailyRet[i];
    if (r !== null && r !== undefined) {
      volN++;
      volS += r;
      volS2 += r * r;
    }
    while (dn[volLo]! <= today - VOL_WINDOW_DAYS) {
      const x = dailyRet[volLo];
      if (x !== null && x !== undefined) {
        volN--;
        volS -= x;
        volS2 -= x * x;
      }
      volLo++;
    }
    let gateClosed = false;
    /** Downside semideviation ratio short / long window, or null with too few returns (gate open). */
    let gateRatio: number | null = null;
    if (gate) {
      if (r !== null && r !== undefined) {
        const d2 = down(i);
        gate2.sN++;
        gate2.sD += d2;
        gate2.lN++;
        gate2.lD += d2;
      }
      while (dn[gate2.sLo]! <= today - gate.shortDays) {
        if (dailyRet[gate2.sLo] !== null && dailyRet[gate2.sLo] !== undefined) {
          gate2.sN--;
          gate2.sD -= down(gate2.sLo);
        }
        gate2.sLo++;
      }
      while (dn[gate2.lLo]! <= today - gate.longDays) {
        if (dailyRet[gate2.lLo] !== null && dailyRet[gate2.lLo] !== undefined) {
          gate2.lN--;
          gate2.lD -= down(gate2.lLo);
        }
        gate2.lLo++;
      }
      if (gate2.sN >= VOL_MIN_RETURNS && gate2.lN >= VOL_GATE_MIN_LONG_RETURNS && gate2.lD > 0) {
        // Semideviations sqrt(mean of squared negative returns); compare squares to avoid the roots.
        gateClosed = gate2.sD / gate2.sN > gate.max * gate.max * (gate2.lD / gate2.lN) * (1 + 1e-12);
        // Running sums can drift a hair below 0 when a window has no down day: never a NaN.
        gateRatio = Math.sqrt(Math.max(0, gate2.sD / gate2.sN / (gate2.lD / gate2.lN)));
      }
    }
    while (fg + 1 < fgDn.length && fgDn[fg + 1]! <= today) fg++;
    while (fr + 1 < frDn.length && frDn[fr + 1]! <= today) fr++;
    while (rg + 1 < rgDn.length && rgDn[rg + 1]! <= today) rg++;
    while (ch + 1 < chDn.length && chDn[ch + 1]! <= today) ch++;
    volNs[i] = volN;
    volRoots[i] = volN >= VOL_MIN_RETURNS ? Math.sqrt(Math.max(0, (volS2 - (volS * volS) / volN) / (volN - 1))) : NaN;
    fgAt[i] = fg;
    frAt[i] = fr;
    rgAt[i] = rg;
    chAt[i] = ch;

    const { names, scores, w, contributions } = factorsOf(dayAt(i));
    let sum = 0;
    let absSum = 0;
    let baseW = 0;
    for (let k = 0; k < names.length; k++) {
      sum += contributions[k]!;
      absSum += w[k]! * Math.abs(scores[k]!);
      baseW += weightsOf[names[k]!];
    }
    const score = round(sum, 4);
    let ws = 0;
    for (let k = 0; k < names.length; k++) ws += w[k]! * scores[k]!;
    const agreement = absSum > 0 ? Math.min(1, Math.abs(ws) / absSum) : 0;
    const coverage = clamp(baseW / applicableWeight, 0, 1);

    // Level: hysteresis around the bands, then confirmation over consecutive days.
    const current: SignalLevel = level ?? (model.startNeutral ? 'neutral' : signalLevel(score, model.bands));
    let proposed: SignalLevel = levelWithHysteresis(score, current, model);
    const held = gateClosed && LEVEL_RANK[proposed] > 0;
    if (held) proposed = 'neutral';
    level = current;
    if (proposed === current) {
      candidate = null;
      run = 0;
    } else if (model.exitAtOnce && lowersConviction(current, proposed)) {
      level = proposed;
      candidate = null;
      run = 0;
    } else {
      if (proposed === candidate) run++;
      else {
        candidate = proposed;
        run = 1;
      }
      if (run >= model.confirmDays) {
        level = proposed;
        candidate = null;
        run = 0;
      }
    }
    // The level rule's snapshot of the day (level, candidate and run change on later days).
    heldAt[i] = held ? 1 : 0;
    gateClosedAt[i] = gateClosed ? 1 : 0;
    gateRatioAt[i] = gateRatio ?? NaN;
    levelAt[i] = SIGNAL_LEVELS.indexOf(level);
    pendingAt[i] = candidate === null ? -1 : SIGNAL_LEVELS.indexOf(candidate);
    pendingDaysAt[i] = run;
    scoreAt[i] = score;
    const result = { signal: level, score, confidence: round(coverage * agreement, 4) } as SignalResult;
    Object.defineProperties(result, lazyProperties);
    result.as_of = c.date;
    out.push(result);
  }
  return out;
}

/** One change of signal level (the shape stored as signal history). */
export interface SignalChange {
  changed_at: string;
  signal: SignalLevel;
  previous_signal: SignalLevel | null;
  score: number;
  confidence: number;
  /** Close of the candle dated `changed_at` (USD). */
  price_usd: number;
  factors: Factor[];
  /** Why the signal took this level that day (the band, hysteresis, confirmation or volatility gate). */
  level_rule: LevelRule;
}

/**
 * The days where the signal level differs from the previous entry's, oldest first; the first
 * entry of `series` is always included with `previous_signal: null`.
 * @param series a computeSignalSeries result (ascending).
 * @param prices the candles it was computed from (price_usd = close on `changed_at`).
 * @throws RangeError when a change date has no candle.
 */
export function signalChanges(series: readonly SignalResult[], prices: readonly Candle[]): SignalChange[] {
  const aligned = series.length === prices.length && series.every((s, i) => s.as_of === prices[i]!.date);
  const closeByDate = aligned ? null : new Map(prices.map((p) => [p.date, p.close]));
  const out: SignalChange[] = [];
  for (let i = 0; i < series.length; i++) {
    const s = series[i]!;
    const prev = i > 0 ? series[i - 1]!.signal : null;
    if (i > 0 && prev === s.signal) continue;
    const price = aligned ? prices[i]!.close : closeByDate!.get(s.as_of);
    if (price === undefined) throw new RangeError(`no candle dated ${s.as_of} for the signal change`);
    out.push({
      changed_at: s.as_of,
      signal: s.signal,
      previous_signal: prev,
      score: s.score,
      confidence: s.confidence,
      price_usd: price,
      factors: s.factors,
      level_rule: s.level_rule,
    });
  }
  return out;
}
