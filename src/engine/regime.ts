/**
 * BTC market regime (bull | neutral | bear) per day, causal, with hysteresis.
 *
 * Method (docs/methodology.md, "Market regime"): five conditions, each scored in [-1, 1]
 * (positive = bullish state), are combined into a weighted raw score in [-1, 1]; a missing
 * condition is dropped and the weights of the others are renormalized. The raw class is
 * bull at score >= +0.2, bear at <= -0.2, else neutral; the reported regime only changes
 * once a different raw class has held for {@link REGIME_CONFIRM_DAYS} consecutive days.
 */
import { returnOverCalendarDays, rsiWilder, sma } from './indicators.ts';
import type {
  Candle,
  FearGreedPoint,
  FundingPoint,
  FundingState,
  MomentumState,
  RegimeConditions,
  RegimeLevel,
  RegimeResult,
  RsiState,
} from './types.ts';
import { assertAscending, clamp, dayNumber, round } from './util.ts';

/** RSI look-back (Wilder 1978). */
export const RSI_PERIOD = 14;
/** RSI state thresholds (Wilder 1978): < 30 oversold, > 70 overbought. */
export const RSI_OVERSOLD = 30;
export const RSI_OVERBOUGHT = 70;
/** Long-term trend filter: simple moving average of 200 daily closes (the common "200-day MA"). */
export const SMA_LONG = 200;
/** Momentum look-back in calendar days. */
export const MOMENTUM_DAYS = 30;
/**
 * Funding-state thresholds, fraction per 8 h: < 0 negative (shorts pay longs); <= 0.0001
 * neutral (0.01 %/8 h is Binance's default rate: the interest component with a zero premium);
 * <= 0.0003 elevated (three times the default); above that extreme.
 */
export const FUNDING_NEUTRAL_MAX = 0.0001;
export const FUNDING_ELEVATED_MAX = 0.0003;
/** A Fear & Greed or funding value older than this many days before the date is not used. */
export const REGIME_STALENESS_DAYS = 3;
/** Raw score thresholds for the bull / bear classes. */
export const REGIME_BULL_MIN = 0.2;
export const REGIME_BEAR_MAX = -0.2;
/** Consecutive days a new raw class must hold before the regime changes (hysteresis). */
export const REGIME_CONFIRM_DAYS = 3;

/**
 * Base weights of the regime components (sum 1). `sma_200` and `return_30d` both belong to
 * the `momentum` condition and are present only together.
 */
export const REGIME_WEIGHTS = {
  sma_200: 0.3,
  return_30d: 0.2,
  rsi: 0.15,
  fear_greed: 0.2,
  funding_rate: 0.15,
} as const;

/** Funding state of a rate (fraction per 8 h); thresholds as {@link FUNDING_NEUTRAL_MAX}. */
export function fundingState(rate: number): FundingState {
  if (rate < 0) return 'negative';
  if (rate <= FUNDING_NEUTRAL_MAX) return 'neutral';
  if (rate <= FUNDING_ELEVATED_MAX) return 'elevated';
  return 'extreme';
}

/** RSI state (Wilder's 30/70 bands). */
export function rsiState(rsi: number): RsiState {
  return rsi < RSI_OVERSOLD ? 'oversold' : rsi > RSI_OVERBOUGHT ? 'overbought' : 'neutral';
}

/** Momentum state: positive when price is above its SMA-200 and up over 30 days, negative when both are below, else neutral. */
export function momentumState(return30dPct: number, priceVsSma200Pct: number): MomentumState {
  if (return30dPct > 0 && priceVsSma200Pct > 0) return 'positive';
  if (return30dPct < 0 && priceVsSma200Pct < 0) return 'negative';
  return 'neutral';
}

/** Raw class of a regime score (bull >= 0.2, bear <= -0.2). */
export function regimeClass(score: number): RegimeLevel {
  return score >= REGIME_BULL_MIN ? 'bull' : score <= REGIME_BEAR_MAX ? 'bear' : 'neutral';
}

const FUNDING_STATE_SCORE: Record<FundingState, number> = { negative: -1, neutral: 0, elevated: 0.5, extreme: 1 };

/**
 * Computes the BTC regime for every BTC candle.
 *
 * @param input.btc BTC/USD daily candles, strictly ascending by date (gaps allowed).
 * @param input.fearGreed alternative.me Fear & Greed values, ascending (gaps allowed).
 * @param input.funding daily mean BTC perpetual funding rates (fraction per 8 h), ascending; may be empty.
 * @returns one {@link RegimeResult} per candle, aligned with `input.btc`. Result i uses only
 *   inputs dated <= btc[i].date. `score` is the raw (unconfirmed) composite rounded to 4
 *   decimals; `regime` is the confirmed class; `since` is the date the current regime was
 *   confirmed (or the first date); `confidence` = coverage x support (see docs).
 *   Conditions whose input is missing (not warm, or older than {@link REGIME_STALENESS_DAYS}
 *   days) are null and excluded from the score.
 * @throws RangeError when an input is not strictly ascending by date or has a bad date.
 */
export function computeRegimeSeries(input: { btc: Candle[]; fearGreed: FearGreedPoint[]; funding: FundingPoint[] }): RegimeResult[] {
  const { btc, fearGreed, funding } = input;
  assertAscending(btc, 'btc candles');
  assertAscending(fearGreed, 'fear & greed');
  assertAscending(funding, 'funding');
  const closes = btc.map((c) => c.close);
  const rsi = rsiWilder(closes, RSI_PERIOD);
  const sma200 = sma(closes, SMA_LONG);
  const ret30 = returnOverCalendarDays(btc, MOMENTUM_DAYS);

  const out: RegimeResult[] = [];
  let fg = -1;
  let fu = -1;
  let regime: RegimeLevel = 'neutral';
  let since = '';
  let candidate: RegimeLevel | null = null;
  let run = 0;

  for (let i = 0; i < btc.length; i++) {
    const c = btc[i]!;
    const d = c.date;
    const dn = dayNumber(d);
    while (fg + 1 < fearGreed.length && fearGreed[fg + 1]!.date <= d) fg++;
    while (fu + 1 < funding.length && funding[fu + 1]!.date <= d) fu++;

    const conditions: RegimeConditions = { rsi: null, fear_greed: null, momentum: null, funding_rate: null };
    let wsum = 0;
    let ssum = 0;
    const add = (w: number, s: number) => {
      wsum += w;
      ssum += w * s;
    };

    const r = rsi[i];
    if (r !== null && r !== undefined) {
      conditions.rsi = { value: round(r, 2), period: RSI_PERIOD, state: rsiState(r), as_of: d };
      add(REGIME_WEIGHTS.rsi, clamp((r - 50) / 20, -1, 1));
    }
    const s200 = sma200[i];
    const r30 = ret30[i];
    if (s200 !== null && s200 !== undefined && r30 !== null && r30 !== undefined && s200 > 0) {
      const vs = (c.close / s200 - 1) * 100;
      conditions.momentum = {
        return_30d_pct: round(r30, 2),
        price_vs_sma_200_pct: round(vs, 2),
        state: momentumState(r30, vs),
        as_of: d,
      };
      add(REGIME_WEIGHTS.sma_200, Math.tanh(vs / 20));
      add(REGIME_WEIGHTS.return_30d, Math.tanh(r30 / 15));
    }
    const f = fg >= 0 ? fearGreed[fg]! : null;
    if (f && dn - dayNumber(f.date) <= REGIME_STALENESS_DAYS) {
      conditions.fear_greed = { value: f.value, classification: f.classification, as_of: f.date };
      add(REGIME_WEIGHTS.fear_greed, clamp((f.value - 50) / 50, -1, 1));
    }
    const fr = fu >= 0 ? funding[fu]! : null;
    if (fr && dn - dayNumber(fr.date) <= REGIME_STALENESS_DAYS) {
      const state = fundingState(fr.rate);
      conditions.funding_rate = {
        value: fr.rate,
        annualized_pct: round(fr.rate * 3 * 365 * 100, 2),
        state,
        as_of: fr.date,
      };
      add(REGIME_WEIGHTS.funding_rate, FUNDING_STATE_SCORE[state]);
    }

    const score = wsum > 0 ? round(ssum / wsum, 4) : 0;
    const raw = regimeClass(score);
    if (i === 0) {
      regime = raw;
      since = d;
    } else if (raw === regime) {
      candidate = null;
      run = 0;
    } else {
      if (raw === candidate) run++;
      else {
        candidate = raw;
        run = 1;
      }
      if (run >= REGIME_CONFIRM_DAYS) {
        regime = raw;
        since = d;
        candidate = null;
        run = 0;
      }
    }
    const coverage = wsum; // base weights sum to 1
    const support =
      regime === 'bull' ? clamp(score / 0.5, 0, 1) : regime === 'bear' ? clamp(-score / 0.5, 0, 1) : clamp(1 - Math.abs(score) / 0.4, 0, 1);
    out.push({ regime, score, confidence: round(coverage * support, 4), since, as_of: d, conditions });
  }
  return out;
}

/**
 * The newest regime result with `as_of` <= `date` (binary search), or null when the series
 * starts after `date`. The series must be ascending by `as_of` (as computeRegimeSeries returns it).
 */
export function regimeAt(series: readonly RegimeResult[], date: string): RegimeResult | null {
  let lo = 0;
  let hi = series.length - 1;
  let ans: RegimeResult | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = series[mid]!;
    if (r.as_of <= date) {
      ans = r;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return ans;
}
