/**
 * Technical indicators over whole series, each computed once in O(n) (O(n·period) for the
 * SMA) and aligned with its input: output[i] is the indicator as of input[i], using only
 * input[0..i] (causal), and `null` while the indicator is not yet warm.
 *
 * RSI, SMA and EMA are delegated to the maintained `trading-signals` library (v8); this
 * module fixes the warm-up convention and validates inputs. Tests check them against an
 * independent implementation and against the textbook RSI example (Wilder 1978, as
 * reproduced by StockCharts).
 */
import { EMA, RSI, SMA } from 'trading-signals';
import { dayNumber } from './util.ts';

function checkInputs(values: readonly number[], period: number, name: string): void {
  if (!Number.isInteger(period) || period < 1) throw new RangeError(`${name}: period must be a positive integer, got ${period}`);
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i])) throw new RangeError(`${name}: value at index ${i} is not a finite number`);
  }
}

/**
 * Wilder's Relative Strength Index (J. Welles Wilder, "New Concepts in Technical Trading
 * Systems", 1978): RS = average gain / average loss of the close-to-close changes, with the
 * averages seeded by the simple mean of the first `period` changes and then smoothed with
 * Wilder's moving average (alpha = 1/period); RSI = 100 - 100 / (1 + RS).
 *
 * @param closes closing prices (any unit), oldest first, consecutive periods.
 * @param period look-back in periods (default 14, Wilder's choice).
 * @returns RSI 0..100 aligned with `closes`; `null` for the first `period` entries (the
 *   first value needs `period + 1` closes). When the average loss is 0 the RSI is 100
 *   (library convention; also when all changes are 0).
 * @throws RangeError on a non-finite close or a period that is not a positive integer.
 */
export function rsiWilder(closes: readonly number[], period = 14): (number | null)[] {
  checkInputs(closes, period, 'rsiWilder');
  const ind = new RSI(period);
  return closes.map((c) => ind.add(c));
}

/**
 * Simple moving average: the mean of the last `period` values.
 * @returns aligned with `values`; `null` for the first `period - 1` entries.
 * @throws RangeError on a non-finite value or a period that is not a positive integer.
 */
export function sma(values: readonly number[], period: number): (number | null)[] {
  checkInputs(values, period, 'sma');
  const ind = new SMA(period);
  return values.map((v) => ind.add(v));
}

/**
 * Exponential moving average with alpha = 2 / (period + 1). Seeded with the first value
 * (the `trading-signals` convention) and reported only once `period` values have been seen,
 * so the seed's weight has decayed to (1 - alpha)^(period - 1) or less: at index i it is
 * (1 - alpha)^i (about 15.6 % at the first value for period 14).
 * @returns aligned with `values`; `null` for the first `period - 1` entries.
 * @throws RangeError on a non-finite value or a period that is not a positive integer.
 */
export function ema(values: readonly number[], period: number): (number | null)[] {
  checkInputs(values, period, 'ema');
  const ind = new EMA(period);
  return values.map((v, i) => {
    const r = ind.add(v);
    return i >= period - 1 ? r : null;
  });
}

/**
 * Percent change over `lookback` entries: (values[i] / values[i - lookback] - 1) * 100.
 * @returns percent (5 = +5 %), aligned; `null` for the first `lookback` entries and where the
 *   base value is 0.
 * @throws RangeError on a non-finite value or a lookback that is not a positive integer.
 */
export function pctChange(values: readonly number[], lookback: number): (number | null)[] {
  checkInputs(values, lookback, 'pctChange');
  return values.map((v, i) => {
    if (i < lookback) return null;
    const base = values[i - lookback]!;
    return base === 0 ? null : (v / base - 1) * 100;
  });
}

/**
 * Percent change of the close over `days` calendar days, for each candle: (close[i] /
 * close[j] - 1) * 100 where candle j is dated exactly `days` days before candle i. Where no
 * candle has that exact date (a gap in the series) the value is `null`: a nearby day is never
 * substituted.
 * @param candles daily candles, strictly ascending by `date` (YYYY-MM-DD).
 * @returns percent, aligned with `candles`; `null` where the base day is missing or its close is 0.
 * @throws RangeError on a bad date, a non-finite close or a non-positive `days`.
 */
export function returnOverCalendarDays(candles: readonly { date: string; close: number }[], days: number): (number | null)[] {
  const closes = candles.map((c) => c.close);
  checkInputs(closes, days, 'returnOverCalendarDays');
  const dn = candles.map((c) => dayNumber(c.date));
  return candles.map((_, i) => {
    const target = dn[i]! - days;
    // Gap-free series: the base is exactly `days` entries back.
    if (i >= days && dn[i - days] === target) {
      const base = closes[i - days]!;
      return base === 0 ? null : (closes[i]! / base - 1) * 100;
    }
    for (let j = i - 1; j >= 0 && dn[j]! >= target; j--) {
      if (dn[j] === target) return closes[j] === 0 ? null : (closes[i]! / closes[j]! - 1) * 100;
    }
    return null;
  });
}
