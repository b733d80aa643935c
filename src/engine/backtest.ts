/**
 * Pure backtest metrics of a daily signal (docs/methodology.md, "Evaluation").
 *
 * Conventions: a position decided at the close of day t earns the close-to-close return of
 * t -> t+1 (the next calendar day; a missing next candle earns nothing and is reported as a
 * gap); a position change of |Δ| units costs `costBps` basis points per unit (long -> flat =
 * 1 unit, long -> short = 2 units); the position before the first day of a window is flat.
 * Returns are fractions (0.05 = 5 %). Sharpe = mean / sample standard deviation of the daily
 * returns x sqrt(365) (crypto trades every day). Max drawdown is the largest fall of the
 * compounded equity curve from its running peak, a fraction <= 0.
 */
import type { SignalLevel } from './types.ts';
import { SIGNAL_LEVELS } from './types.ts';
import { addDays, dayNumber } from './util.ts';

/** Days per year used to annualise Sharpe ratios (crypto trades every calendar day). */
export const DAYS_PER_YEAR = 365;
/** Default cost per unit of position change, in basis points. */
export const DEFAULT_COST_BPS = 10;
/** Forward horizons (calendar days) of the hit rates and the information coefficients. */
export const HORIZONS = [7, 30] as const;
/** A level change is "reversed" when the previous level returns within this many days. */
export const REVERSAL_DAYS = 3;

/** One asset-day of a signal series: the close of the day and what the signal said at that close. */
export interface SignalDay {
  date: string;
  close: number;
  signal: SignalLevel;
  score: number;
  confidence: number;
}

/** Mean of `xs` (NaN when empty). */
export function mean(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return xs.length > 0 ? s / xs.length : NaN;
}

/** Sample standard deviation (n - 1); NaN with fewer than 2 values. */
export function stdev(xs: readonly number[]): number {
  if (xs.length < 2) return NaN;
  const m = mean(xs);
  let s = 0;
  for (const x of xs) s += (x - m) * (x - m);
  return Math.sqrt(s / (xs.length - 1));
}

/**
 * Annualised Sharpe ratio of daily returns (risk-free rate 0): mean / sample sd x sqrt(365).
 * @returns null with fewer than 2 returns or a zero standard deviation (e.g. always flat).
 */
export function sharpe(daily: readonly number[]): number | null {
  const sd = stdev(daily);
  if (!(sd > 0)) return null;
  return (mean(daily) / sd) * Math.sqrt(DAYS_PER_YEAR);
}

/** Compounded total return of daily returns (fraction). */
export function totalReturn(daily: readonly number[]): number {
  let e = 1;
  for (const r of daily) e *= 1 + r;
  return e - 1;
}

/** Maximum drawdown of the compounded equity curve of daily returns: a fraction in [-1, 0]. */
export function maxDrawdown(daily: readonly number[]): number {
  let e = 1;
  let peak = 1;
  let mdd = 0;
  for (const r of daily) {
    e *= 1 + r;
    if (e > peak) peak = e;
    const dd = e / peak - 1;
    if (dd < mdd) mdd = dd;
  }
  return mdd;
}

/** Average ranks (1-based, ties share the mean rank). */
export function ranks(xs: readonly number[]): number[] {
  const idx = xs.map((_, i) => i).sort((a, b) => xs[a]! - xs[b]!);
  const out = new Array<number>(xs.length);
  for (let i = 0; i < idx.length;) {
    let j = i;
    while (j + 1 < idx.length && xs[idx[j + 1]!] === xs[idx[i]!]) j++;
    const r = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) out[idx[k]!] = r;
    i = j + 1;
  }
  return out;
}

/** Pearson correlation; null when fewer than 3 pairs or a constant side. */
export function pearson(xs: readonly number[], ys: readonly number[]): number | null {
  const n = xs.length;
  if (n < 3 || ys.length !== n) return null;
  const mx = mean(xs);
  const my = mean(ys);
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = xs[i]! - mx;
    const dy = ys[i]! - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (!(sxx > 0 && syy > 0)) return null;
  return sxy / Math.sqrt(sxx * syy);
}

/** Spearman rank correlation (Pearson correlation of average ranks); null as {@link pearson}. */
export function spearman(xs: readonly number[], ys: readonly number[]): number | null {
  if (xs.length !== ys.length) throw new RangeError('spearman: series of different lengths');
  return pearson(ranks(xs), ranks(ys));
}

/** Median (mean of the two middle values for an even count); null when empty. */
export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Lengths (days) of the runs of equal consecutive values, in order (runs are cut at the ends of the input). */
export function runLengths<T>(xs: readonly T[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < xs.length;) {
    let j = i;
    while (j + 1 < xs.length && xs[j + 1] === xs[i]) j++;
    out.push(j - i + 1);
    i = j + 1;
  }
  return out;
}

/**
 * Level changes and how many were reversed: a change at day i from A to B is reversed when
 * the value is A again on any of days i+1 .. i+`within`.
 */
export function reversals<T>(xs: readonly T[], within = REVERSAL_DAYS): { changes: number; reversed: number } {
  let changes = 0;
  let reversed = 0;
  for (let i = 1; i < xs.length; i++) {
    if (xs[i] === xs[i - 1]) continue;
    changes++;
    for (let k = i + 1; k <= Math.min(xs.length - 1, i + within); k++) {
      if (xs[k] === xs[i - 1]) {
        reversed++;
        break;
      }
    }
  }
  return { changes, reversed };
}

/** Position of a level: long/flat holds 1 on buy and strong_buy; long/short adds -1 on sell and strong_sell. */
export function position(level: SignalLevel, mode: 'long_flat' | 'long_short'): number {
  if (level === 'buy' || level === 'strong_buy') return 1;
  if (mode === 'long_short' && (level === 'sell' || level === 'strong_sell')) return -1;
  return 0;
}

/** Performance of one return stream over a window. */
export interface Performance {
  /** Compounded return over the window (fraction). */
  total_return: number;
  /** Annualised Sharpe (daily, sqrt(365)); null when undefined (flat throughout). */
  sharpe: number | null;
  /** Max drawdown (fraction <= 0). */
  max_drawdown: number;
}

/** Strategy performance with its trading statistics. */
export interface StrategyPerformance extends Performance {
  /** Share of days with a non-zero position. */
  exposure: number;
  /** Number of position changes (each costs `cost_bps` per unit). */
  trades: number;
}

/** Forward-return statistics of the levels over a window. */
export interface HitRates {
  /** Asset-days with a known 30-day forward return. */
  days_30d: number;
  /** P(30-day forward return > 0) over all those days. */
  p_up_30d: number | null;
  /** P(up 30 d | buy or strong_buy) - P(up 30 d); null without buy days. */
  buy_edge_30d: number | null;
  /** P(down 30 d | sell or strong_sell) - P(down 30 d); null without sell days. */
  sell_edge_30d: number | null;
  buy_days: number;
  sell_days: number;
}

/** The daily sample of one asset in a window, ready for metrics (also pooled across assets). */
export interface Sample {
  /** Dates of the days that earn a next-day return (decision days). */
  dates: string[];
  bh: number[];
  longFlat: number[];
  longShort: number[];
  exposureLF: number[];
  /** |long/short position| per decision day. */
  exposureLS: number[];
  tradesLF: number;
  tradesLS: number;
  levels: SignalLevel[];
  /** Scores and forward returns (fractions) of days with a known forward return, per horizon. */
  ic: Record<(typeof HORIZONS)[number], { score: number[]; fwd: number[] }>;
  /** Levels, confidences and 30-day forward returns of days with a known 30-day return. */
  fwd30: { level: SignalLevel; confidence: number; ret: number }[];
  /**
   * Days with no candle on the next calendar day although a later candle exists (holes in
   * the data; they earn nothing). The series' last day, whose next close does not exist yet,
   * is not a gap (it earns nothing either).
   */
  gaps: number;
}

/**
 * Builds the daily sample of one asset for the days with from <= date <= to.
 * @param days the asset's signal days, strictly ascending by date (the whole series: forward
 *   returns may look past `to`, positions never do).
 * @param costBps cost per unit of position change, in basis points.
 */
export function buildSample(days: readonly SignalDay[], from: string, to: string, costBps: number): Sample {
  const cost = costBps / 10000;
  const byDay = new Map<number, number>();
  for (let i = 0; i < days.length; i++) byDay.set(dayNumber(days[i]!.date), i);
  const s: Sample = {
    dates: [],
    bh: [],
    longFlat: [],
    longShort: [],
    exposureLF: [],
    exposureLS: [],
    tradesLF: 0,
    tradesLS: 0,
    levels: [],
    ic: { 7: { score: [], fwd: [] }, 30: { score: [], fwd: [] } },
    fwd30: [],
    gaps: 0,
  };
  let pLF = 0;
  let pLS = 0;
  for (let i = 0; i < days.length; i++) {
    const d = days[i]!;
    if (d.date < from || d.date > to) continue;
    const dn = dayNumber(d.date);
    s.levels.push(d.signal);
    for (const h of HORIZONS) {
      const j = byDay.get(dn + h);
      if (j === undefined) continue;
      const fwd = days[j]!.close / d.close - 1;
      s.ic[h].score.push(d.score);
      s.ic[h].fwd.push(fwd);
      if (h === 30) s.fwd30.push({ level: d.signal, confidence: d.confidence, ret: fwd });
    }
    const next = byDay.get(dn + 1);
    if (next === undefined) {
      if (i < days.length - 1) s.gaps++;
      continue;
    }
    const r = days[next]!.close / d.close - 1;
    const lf = position(d.signal, 'long_flat');
    const ls = position(d.signal, 'long_short');
    if (lf !== pLF) s.tradesLF++;
    if (ls !== pLS) s.tradesLS++;
    s.dates.push(d.date);
    s.bh.push(r);
    s.longFlat.push(lf * r - cost * Math.abs(lf - pLF));
    s.longShort.push(ls * r - cost * Math.abs(ls - pLS));
    s.exposureLF.push(lf);
    s.exposureLS.push(Math.abs(ls));
    pLF = lf;
    pLS = ls;
  }
  return s;
}

/** Performance of daily returns. */
export function performance(daily: readonly number[]): Performance {
  return { total_return: totalReturn(daily), sharpe: sharpe(daily), max_drawdown: maxDrawdown(daily) };
}

/** Buy and sell edges of levels against 30-day forward returns. */
export function hitRates(rows: readonly { level: SignalLevel; ret: number }[]): HitRates {
  const n = rows.length;
  let up = 0;
  let buy = 0;
  let buyUp = 0;
  let sell = 0;
  let sellDown = 0;
  for (const r of rows) {
    if (r.ret > 0) up++;
    if (r.level === 'buy' || r.level === 'strong_buy') {
      buy++;
      if (r.ret > 0) buyUp++;
    } else if (r.level === 'sell' || r.level === 'strong_sell') {
      sell++;
      if (r.ret < 0) sellDown++;
    }
  }
  const down = rows.filter((r) => r.ret < 0).length;
  return {
    days_30d: n,
    p_up_30d: n > 0 ? up / n : null,
    buy_edge_30d: buy > 0 && n > 0 ? buyUp / buy - up / n : null,
    sell_edge_30d: sell > 0 && n > 0 ? sellDown / sell - down / n : null,
    buy_days: buy,
    sell_days: sell,
  };
}

/** Hit rate of the level's direction (up for buys, down for sells) per confidence band. */
export interface ConfidenceBand {
  /** Lower bound (inclusive) and upper bound (exclusive; the last band includes 1). */
  from: number;
  to: number;
  /** Non-neutral asset-days in the band with a known 30-day forward return. */
  days: number;
  /** Share of them whose 30-day return went the level's way; null when empty. */
  hit_rate: number | null;
}

/** Confidence bands of the hit-rate table. */
export const CONFIDENCE_BANDS: readonly [number, number][] = [
  [0, 0.25],
  [0.25, 0.5],
  [0.5, 0.75],
  [0.75, 1],
];

/** Index of the {@link CONFIDENCE_BANDS} band holding `c`, or -1 outside [0, 1]. */
function bandOf(c: number): number {
  const last = CONFIDENCE_BANDS.length - 1;
  for (let k = 0; k <= last; k++) {
    const [lo, hi] = CONFIDENCE_BANDS[k]!;
    if (c >= lo && (k === last ? c <= hi : c < hi)) return k;
  }
  return -1;
}

/**
 * Hit rates of non-neutral days per confidence band ({@link CONFIDENCE_BANDS}): one pass over
 * `rows` counting into the bands, then one result per band with its bounds copied from the
 * table. (It was one pass per band, each building its result after its loop: a CI run on
 * Node 24.21.0 once served the pooled table's first band with the second band's bounds,
 * not reproduced since; this form has no long loop inside the callback that builds a band.)
 */
export function confidenceTable(rows: readonly { level: SignalLevel; confidence: number; ret: number }[]): ConfidenceBand[] {
  const days = CONFIDENCE_BANDS.map(() => 0);
  const hits = CONFIDENCE_BANDS.map(() => 0);
  for (const r of rows) {
    if (r.level === 'neutral') continue;
    const k = bandOf(r.confidence);
    if (k < 0) continue;
    days[k]!++;
    const bull = r.level === 'buy' || r.level === 'strong_buy';
    if (bull ? r.ret > 0 : r.ret < 0) hits[k]!++;
  }
  return CONFIDENCE_BANDS.map(([from, to], k) => ({ from, to, days: days[k]!, hit_rate: days[k]! > 0 ? hits[k]! / days[k]! : null }));
}

/** The metrics of one asset (or the pool) over a window. */
export interface WindowMetrics {
  from: string;
  to: string;
  /** Decision days in the window (days earning a next-day return). */
  days: number;
  /** Days without a next-day candle while later candles exist (holes in the data; see Sample). */
  gaps: number;
  cost_bps: number;
  buy_and_hold: Performance;
  long_flat: StrategyPerformance;
  long_short: StrategyPerformance;
  /** Median length (days) of a run of one level (runs cut at the window's ends). */
  median_run_days: number | null;
  level_changes: number;
  /** Share of level changes reversed within {@link REVERSAL_DAYS} days. */
  reversed_within_3d: number | null;
  hit_rates: HitRates;
  /** Spearman IC of the daily score against the next 7- and 30-day returns. */
  ic_7d: number | null;
  ic_30d: number | null;
  /** Share of asset-days per level. */
  levels: Record<SignalLevel, number>;
  /** Hit rate of non-neutral levels per confidence band. */
  confidence: ConfidenceBand[];
}

function levelShares(levels: readonly SignalLevel[]): Record<SignalLevel, number> {
  const out = Object.fromEntries(SIGNAL_LEVELS.map((l) => [l, 0])) as Record<SignalLevel, number>;
  for (const l of levels) out[l]++;
  for (const l of SIGNAL_LEVELS) out[l] = levels.length > 0 ? out[l] / levels.length : 0;
  return out;
}

/**
 * Metrics of one asset's sample. Run lengths and reversals are computed on `levels` as one
 * consecutive sequence.
 */
export function sampleMetrics(
  s: Sample,
  from: string,
  to: string,
  costBps: number,
  runs: { lengths: number[]; changes: number; reversed: number },
): WindowMetrics {
  const lf = performance(s.longFlat);
  const ls = performance(s.longShort);
  return {
    from,
    to,
    days: s.dates.length,
    gaps: s.gaps,
    cost_bps: costBps,
    buy_and_hold: performance(s.bh),
    long_flat: { ...lf, exposure: s.exposureLF.length ? mean(s.exposureLF) : 0, trades: s.tradesLF },
    long_short: { ...ls, exposure: s.exposureLS.length ? mean(s.exposureLS) : 0, trades: s.tradesLS },
    median_run_days: median(runs.lengths),
    level_changes: runs.changes,
    reversed_within_3d: runs.changes > 0 ? runs.reversed / runs.changes : null,
    hit_rates: hitRates(s.fwd30),
    ic_7d: spearman(s.ic[7].score, s.ic[7].fwd),
    ic_30d: spearman(s.ic[30].score, s.ic[30].fwd),
    levels: levelShares(s.levels),
    confidence: confidenceTable(s.fwd30),
  };
}

/**
 * Metrics of one asset over [from, to]. The result's `from` is the asset's first day of data
 * when its data starts after `from` (HYPE, listed 2024-12: its figures cover its own days,
 * not the window's years).
 * @param days the asset's whole signal series (ascending); forward returns may use closes after `to`.
 */
export function assetMetrics(days: readonly SignalDay[], from: string, to: string, costBps = DEFAULT_COST_BPS): WindowMetrics {
  const s = buildSample(days, from, to, costBps);
  const rv = reversals(s.levels);
  const first = days.find((d) => d.date >= from)?.date;
  return sampleMetrics(s, first !== undefined && first > from && first <= to ? first : from, to, costBps, {
    lengths: runLengths(s.levels),
    ...rv,
  });
}

/**
 * Pooled metrics over several assets: returns are those of an equal-weight portfolio
 * rebalanced daily over the assets with a return that day (each asset's own costs included);
 * hit rates, ICs, level shares, runs and reversals pool all asset-days.
 */
export function pooledMetrics(
  series: readonly (readonly SignalDay[])[],
  from: string,
  to: string,
  costBps = DEFAULT_COST_BPS,
): WindowMetrics {
  const samples = series.map((d) => buildSample(d, from, to, costBps));
  const byDate = new Map<string, { bh: number[]; lf: number[]; ls: number[]; ex: number[]; exs: number[] }>();
  for (const s of samples) {
    for (let i = 0; i < s.dates.length; i++) {
      let e = byDate.get(s.dates[i]!);
      if (!e) byDate.set(s.dates[i]!, (e = { bh: [], lf: [], ls: [], ex: [], exs: [] }));
      e.bh.push(s.bh[i]!);
      e.lf.push(s.longFlat[i]!);
      e.ls.push(s.longShort[i]!);
      e.ex.push(s.exposureLF[i]!);
      e.exs.push(s.exposureLS[i]!);
    }
  }
  const dates = [...byDate.keys()].sort();
  const pooled: Sample = {
    dates,
    bh: dates.map((d) => mean(byDate.get(d)!.bh)),
    longFlat: dates.map((d) => mean(byDate.get(d)!.lf)),
    longShort: dates.map((d) => mean(byDate.get(d)!.ls)),
    exposureLF: dates.map((d) => mean(byDate.get(d)!.ex)),
    exposureLS: dates.map((d) => mean(byDate.get(d)!.exs)),
    tradesLF: samples.reduce((a, s) => a + s.tradesLF, 0),
    tradesLS: samples.reduce((a, s) => a + s.tradesLS, 0),
    levels: samples.flatMap((s) => s.levels),
    ic: {
      7: { score: samples.flatMap((s) => s.ic[7].score), fwd: samples.flatMap((s) => s.ic[7].fwd) },
      30: { score: samples.flatMap((s) => s.ic[30].score), fwd: samples.flatMap((s) => s.ic[30].fwd) },
    },
    fwd30: samples.flatMap((s) => s.fwd30),
    gaps: samples.reduce((a, s) => a + s.gaps, 0),
  };
  const lengths = samples.flatMap((s) => runLengths(s.levels));
  let changes = 0;
  let reversed = 0;
  for (const s of samples) {
    const r = reversals(s.levels);
    changes += r.changes;
    reversed += r.reversed;
  }
  return sampleMetrics(pooled, from, to, costBps, { lengths, changes, reversed });
}

/** The last day `d` such that every 30-day forward return of days <= d is known by `through`. */
export function lastScorableDay(through: string): string {
  return addDays(through, -30);
}
