/**
 * The backtest driver (docs/methodology.md, "Evaluation"): evaluates the signal series the
 * service itself computes (MarketService.seriesFor, the same point-in-time computation as the
 * served signals and the history backfill) with the pure metrics of src/engine/backtest.ts,
 * over a fixed window or walk-forward.
 */
import { assetMetrics, DEFAULT_COST_BPS, pooledMetrics, type SignalDay, type WindowMetrics } from '../engine/backtest.ts';
import {
  CURRENT_LIVE_FROM,
  CURRENT_MODEL,
  MODEL_V1,
  MODEL_V2,
  MODEL_V2_GRID,
  MODEL_V3,
  MODEL_V3_GRID,
  MODEL_V4,
  MODEL_V4_GRID,
  modelV2,
  modelV3,
  modelV4,
  type SignalModel,
} from '../engine/signal.ts';
import type { SignalResult } from '../engine/types.ts';
import { addDays, isCalendarDay } from '../engine/util.ts';
import type { MarketData } from '../providers/port.ts';

/** What the driver needs from MarketService (kept minimal so MarketService can import this file). */
export interface BacktestSource {
  readonly data: MarketData;
  readonly asOf: string;
  seriesFor(model: SignalModel): Map<string, SignalResult[]>;
}

/** First scored year of the walk-forward. */
export const WALK_FORWARD_FIRST_YEAR = 2020;
/** Start of the default evaluation window (the walk-forward's first scored day). */
export const DEFAULT_FROM = `${WALK_FORWARD_FIRST_YEAR}-01-01`;

/** Options of {@link runBacktest}. */
export interface BacktestOptions {
  /** First and last decision day (YYYY-MM-DD, inclusive); `to` defaults to the data's as-of day. */
  from: string;
  to?: string;
  /** Cost per unit of position change, basis points (default 10). */
  costBps?: number;
  /** Walk-forward (the model's bands chosen per year on prior data) instead of one fixed model. */
  walkForward?: boolean;
  /**
   * Model version: 'signals-v1' to 'signals-v4'; default the served model. Walk-forward
   * takes v2, v3 or v4 (the models with a band grid).
   */
  model?: string;
}

/** One year's parameter choice in walk-forward mode. */
export interface YearChoice {
  year: number;
  /** The data the choice was made on: decision days up to this date (so every 30-day forward return is before the year). */
  trained_through: string;
  bands: SignalModel['bands'];
  /** Objective of every candidate: pooled long/short Sharpe on the training data. */
  candidates: { bands: SignalModel['bands']; objective: number | null }[];
}

/** One asset's metrics with its id. */
export type AssetWindowMetrics = WindowMetrics & { asset: string; symbol: string };

/** The backtest report (the `backtest --json` output and the walk-forward part of GET /track-record). */
export interface BacktestReport {
  model_version: string;
  mode: 'fixed' | 'walk_forward';
  from: string;
  to: string;
  cost_bps: number;
  /** Bands of the fixed model, or null in walk-forward mode (see `choices`). */
  bands: SignalModel['bands'] | null;
  choices: YearChoice[];
  pooled: WindowMetrics;
  assets: AssetWindowMetrics[];
}

/** Signal days of one asset from a series aligned with its candles. */
function signalDays(series: readonly SignalResult[], closes: readonly { date: string; close: number }[]): SignalDay[] {
  return series.map((s, i) => ({ date: s.as_of, close: closes[i]!.close, signal: s.signal, score: s.score, confidence: s.confidence }));
}

/** The signal days per model (key: the model's JSON) of a source made by {@link withDaysMemo}. */
const dayMemos = new WeakMap<BacktestSource, Map<string, Map<string, SignalDay[]>>>();

/**
 * `src` with the signal days of each model kept for the life of the returned object (one
 * backtest or one track record), so a walk-forward converts each parameter set's series once.
 * Only the days are kept (date, close, level, score, confidence), not the whole series with
 * their factors and sources, which a walk-forward would otherwise hold for every grid entry
 * at once. Measured on a service's first GET /track-record (docs/benchmarks.md, "Tenth
 * session", two runs each): Node 20 2.6-2.8 s and a peak RSS of 345-349 MB instead of
 * 3.2-3.3 s and 387-392 MB; Node 24 2.2-2.3 s and 474 MB instead of 2.7-3.6 s and 515-527 MB.
 * A source that has the memo is returned as is.
 */
function withDaysMemo(src: BacktestSource): BacktestSource {
  if (dayMemos.has(src)) return src;
  const memoized: BacktestSource = { data: src.data, asOf: src.asOf, seriesFor: (model) => src.seriesFor(model) };
  dayMemos.set(memoized, new Map());
  return memoized;
}

/**
 * The signal days of every asset under `model` (asset id -> days aligned with its candles),
 * from the memo when `src` has one ({@link withDaysMemo}); also read by
 * scripts/experiments/model-selection.ts.
 */
export function daysOf(src: BacktestSource, model: SignalModel): Map<string, SignalDay[]> {
  const memo = dayMemos.get(src);
  const key = memo ? JSON.stringify(model) : '';
  const hit = memo?.get(key);
  if (hit) return hit;
  const out = new Map<string, SignalDay[]>();
  for (const [asset, series] of src.seriesFor(model)) out.set(asset, signalDays(series, src.data.candles.get(asset)!));
  memo?.set(key, out);
  return out;
}

function checkDay(d: string, what: string): void {
  if (!isCalendarDay(d)) {
    throw new RangeError(`${what} must be a calendar day YYYY-MM-DD, got '${d}'`);
  }
}

/** The window a backtest evaluates, from {@link backtestWindow}. */
export interface BacktestWindow {
  /** First and last decision day to evaluate: the requested window clamped to the data. */
  from: string;
  to: string;
  /** First and last decision day the data holds (the first and last day of any asset's candles). */
  dataFrom: string;
  dataTo: string;
  /** Whether the requested `from` was before the data (then `from` = `dataFrom`). */
  clampedFrom: boolean;
  /** Whether the requested `to` was after the data (then `to` = `dataTo`). */
  clampedTo: boolean;
  /**
   * Walk-forward mode: whether the requested `from` was before the first scored year (then
   * `from` = {@link DEFAULT_FROM}: earlier days have no data before them to choose bands on).
   */
  clampedToWalkForward: boolean;
}

/**
 * The window a backtest over the requested [from, to] evaluates (the `backtest` command's):
 * the days are checked as {@link runBacktest} checks them, then clamped to the decision days
 * the data holds (every candle day of an asset has a signal), so that a report never names
 * days the data does not have.
 * `toGiven` false: `to` is the as-of day, the command's default (the messages say so).
 * @throws RangeError on a bad day or from > to; and, naming the days the data covers, when the
 *   window holds no decision day, or none with a next day's close to score it.
 */
export function backtestWindow(data: MarketData, from: string, to: string, toGiven = true, walkForward = false): BacktestWindow {
  checkDay(from, '--from');
  checkDay(to, '--to');
  // Walk-forward scores each year with bands chosen on the years before it, from 2020: a day
  // before would be scored with bands chosen on data that includes it (in sample).
  if (walkForward && to < DEFAULT_FROM)
    throw new RangeError(
      `--walk-forward scores the years from ${WALK_FORWARD_FIRST_YEAR} (each with bands chosen on the data before it), and --to ${to} is before ${DEFAULT_FROM}: choose a window from ${DEFAULT_FROM}, or leave out --walk-forward`,
    );
  const wfClamped = walkForward && from < DEFAULT_FROM;
  if (wfClamped) from = DEFAULT_FROM;
  let dataFrom: string | undefined;
  let dataTo: string | undefined;
  for (const a of data.assets) {
    const c = data.candles.get(a.asset);
    if (!c?.length) continue;
    if (dataFrom === undefined || c[0]!.date < dataFrom) dataFrom = c[0]!.date;
    if (dataTo === undefined || c.at(-1)!.date > dataTo) dataTo = c.at(-1)!.date;
  }
  if (dataFrom === undefined || dataTo === undefined) throw new RangeError('the data holds no prices: there is nothing to evaluate');
  const covers = `the data covers ${dataFrom} to ${dataTo}`;
  if (from > to)
    throw new RangeError(
      toGiven
        ? `--from (${from}) is after --to (${to})`
        : `--from (${from}) is after the as-of day ${to}, the default --to: ${covers}; choose --from within it`,
    );
  const w = {
    from: from < dataFrom ? dataFrom : from,
    to: to > dataTo ? dataTo : to,
    dataFrom,
    dataTo,
    clampedFrom: from < dataFrom,
    clampedTo: to > dataTo,
    clampedToWalkForward: wfClamped,
  };
  if (w.from > w.to) throw new RangeError(`no data in ${from} → ${to}: ${covers}; choose --from and --to within it`);
  const scored = data.assets.some((a) => {
    const c = data.candles.get(a.asset) ?? [];
    return c.some((d, i) => d.date >= w.from && d.date <= w.to && c[i + 1]?.date === addDays(d.date, 1));
  });
  if (!scored)
    throw new RangeError(
      `nothing to evaluate in ${w.from} → ${w.to}: no day in it has a next day's close to score it (${covers}); choose a longer window`,
    );
  return w;
}

/** A model with a walk-forward grid: its band grid and the model for each grid entry. */
export interface ModelFamily {
  version: string;
  grid: readonly SignalModel['bands'][];
  withBands: (bands: SignalModel['bands']) => SignalModel;
}

/** The models the backtest knows, by version (fixed mode: all; walk-forward: those with a grid). */
const MODELS: readonly { model: SignalModel; family: ModelFamily | null }[] = [
  { model: MODEL_V1, family: null },
  { model: MODEL_V2, family: { version: MODEL_V2.version, grid: MODEL_V2_GRID, withBands: modelV2 } },
  { model: MODEL_V3, family: { version: MODEL_V3.version, grid: MODEL_V3_GRID, withBands: modelV3 } },
  { model: MODEL_V4, family: { version: MODEL_V4.version, grid: MODEL_V4_GRID, withBands: modelV4 } },
];
const KNOWN = MODELS.map((m) => m.model.version).join(', ');

/** The model named `version` for a fixed-mode backtest (default: the served model). */
export function modelByVersion(version: string | undefined): SignalModel {
  if (version === undefined || version === CURRENT_MODEL.version) return CURRENT_MODEL;
  const m = MODELS.find((x) => x.model.version === version);
  if (!m) throw new RangeError(`unknown model '${version}': use ${KNOWN}`);
  return m.model;
}

/** The walk-forward family of `version` (default: the served model's). */
export function familyByVersion(version: string | undefined): ModelFamily {
  const v = version ?? CURRENT_MODEL.version;
  const m = MODELS.find((x) => x.model.version === v);
  if (!m) throw new RangeError(`unknown model '${v}': use ${KNOWN}`);
  if (!m.family)
    throw new RangeError(
      `--walk-forward evaluates ${MODELS.filter((x) => x.family)
        .map((x) => x.model.version)
        .join(', ')} only`,
    );
  return m.family;
}

/**
 * Walk-forward choice of a model family's bands (default: the served model's) for `year` (or for a period starting on `firstDay`):
 * the grid entry with the best pooled long/short Sharpe over all decision days up to
 * `firstDay` minus 31 days (so every 30-day
 * forward return and every next-day return used lies before the year). Ties go to the earlier
 * grid entry.
 */
export function chooseBands(
  src: BacktestSource,
  year: number,
  costBps: number,
  firstDay = `${year}-01-01`,
  family: ModelFamily = familyByVersion(undefined),
): YearChoice {
  const through = addDays(firstDay, -31);
  const candidates = family.grid.map((bands) => {
    const all = [...daysOf(src, family.withBands(bands)).values()];
    const m = pooledMetrics(all, '1970-01-01', through, costBps);
    return { bands, objective: m.long_short.sharpe };
  });
  let best = candidates[0]!;
  for (const c of candidates) if ((c.objective ?? -Infinity) > (best.objective ?? -Infinity)) best = c;
  return { year, trained_through: through, bands: best.bands, candidates };
}

/**
 * Runs the backtest over [from, to] for every asset with data and pooled.
 * Fixed mode evaluates one model; walk-forward mode scores each calendar year from 2020 with
 * the bands chosen on the data before it ({@link chooseBands}) and concatenates the years.
 * @throws RangeError on a bad day, from > to, a walk-forward `from` before 2020-01-01, a
 *   negative cost or an unknown model (the CLI prints it as a usage error).
 */
export function runBacktest(source: BacktestSource, opts: BacktestOptions): BacktestReport {
  const src = withDaysMemo(source);
  const from = opts.from;
  const to = opts.to ?? src.asOf;
  checkDay(from, '--from');
  checkDay(to, '--to');
  if (from > to) throw new RangeError(`--from (${from}) is after --to (${to})`);
  if (opts.walkForward && from < DEFAULT_FROM)
    throw new RangeError(
      `walk-forward mode scores from ${DEFAULT_FROM} (each year with bands chosen on the data before it); --from ${from} would score earlier days in sample`,
    );
  const costBps = opts.costBps ?? DEFAULT_COST_BPS;
  if (!(Number.isFinite(costBps) && costBps >= 0)) throw new RangeError(`--cost-bps must be a number >= 0, got ${opts.costBps}`);

  let days: Map<string, SignalDay[]>;
  const choices: YearChoice[] = [];
  let version: string;
  let bands: SignalModel['bands'] | null = null;
  if (opts.walkForward) {
    const family = familyByVersion(opts.model);
    version = family.version;
    const firstYear = Math.max(WALK_FORWARD_FIRST_YEAR, Number(from.slice(0, 4)));
    const lastYear = Number(to.slice(0, 4));
    for (let y = firstYear; y <= lastYear; y++) choices.push(chooseBands(src, y, costBps, `${y}-01-01`, family));
    const perYear = new Map(choices.map((c) => [c.year, daysOf(src, family.withBands(c.bands))]));
    days = new Map();
    const first = choices[0];
    for (const asset of first ? perYear.get(first.year)!.keys() : []) {
      const seq = perYear.get(first!.year)!.get(asset)!;
      days.set(
        asset,
        seq.map((d, i) => {
          const y = Number(d.date.slice(0, 4));
          const chosen = perYear.get(Math.min(Math.max(y, first!.year), lastYear))!;
          return chosen.get(asset)![i]!;
        }),
      );
    }
  } else {
    const model = modelByVersion(opts.model);
    version = model.version;
    bands = model.bands;
    days = daysOf(src, model);
  }

  const assets: AssetWindowMetrics[] = [];
  const pool: SignalDay[][] = [];
  for (const a of src.data.assets) {
    const d = days.get(a.asset);
    if (!d) continue;
    const m = assetMetrics(d, from, to, costBps);
    if (m.days === 0) continue;
    assets.push({ asset: a.asset, symbol: a.symbol, ...m });
    pool.push(d);
  }
  return {
    model_version: version,
    mode: opts.walkForward ? 'walk_forward' : 'fixed',
    from,
    to,
    cost_bps: costBps,
    bands,
    choices,
    pooled: pooledMetrics(pool, from, to, costBps),
    assets,
  };
}

/** Significant digits of every figure a published report gives: more than the data's precision, fewer than a float's noise. */
export const REPORT_DIGITS = 6;

/**
 * A copy of `value` with every non-integer number rounded to {@link REPORT_DIGITS}
 * significant digits (an objective of 0.0028200871052236503 reads 0.00282009), for the
 * reports as they are published: the CLI's `--json` and GET /track-record. Reports are
 * computed exactly and rounded only here, on the way out: nothing is computed or compared
 * (Sharpe wins, targets, band choices) or formatted for a table from a rounded figure.
 */
export function roundFigures<T>(value: T): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'number') return Number.isInteger(v) || !Number.isFinite(v) ? v : Number(v.toPrecision(REPORT_DIGITS));
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/**
 * The report of each calendar year of `opts.from`..`opts.to` on its own (the first and last
 * year cut to the window), with the same options: how much of a window's result one year
 * carries (docs/track-record.md, "By year"). Walk-forward years choose their bands as in the
 * whole-window run (each on the data before its year). One memo of signal days serves all.
 * @throws RangeError as runBacktest.
 */
export function backtestByYear(source: BacktestSource, opts: BacktestOptions & { to: string }): { year: number; report: BacktestReport }[] {
  const src = withDaysMemo(source);
  const out: { year: number; report: BacktestReport }[] = [];
  for (let y = Number(opts.from.slice(0, 4)); y <= Number(opts.to.slice(0, 4)); y++) {
    const from = `${y}-01-01` < opts.from ? opts.from : `${y}-01-01`;
    const to = `${y}-12-31` > opts.to ? opts.to : `${y}-12-31`;
    out.push({ year: y, report: runBacktest(src, { ...opts, from, to }) });
  }
  return out;
}

/** The published track record (GET /api/v1/track-record). */
export interface TrackRecord {
  model_version: string;
  /** Walk-forward, out of sample, from 2020-01-01 through the data's as-of day, 10 bps per position change. */
  walk_forward: BacktestReport;
  /**
   * The walk-forward window's calendar years, each scored on its own (pooled metrics, and on
   * how many of the assets with data that year long/flat's Sharpe was at least buy-and-hold's):
   * how much of the whole-window result one year carries (docs/track-record.md, "By year").
   */
  by_year: { year: number; pooled: BacktestReport['pooled']; long_flat_sharpe_wins: { assets: number; of: number } }[];
  /**
   * The served model after the data it was built on (`from` = the first day after it), recomputed
   * from stored data. `to` is the data's as-of day, or null while the data ends before `from`
   * (no day to score yet: `days` 0, `report` null).
   */
  live: { from: string; to: string | null; days: number; report: BacktestReport | null; note: string };
}

/**
 * The track record: the walk-forward report and the live period of the served model.
 * Costly (several whole-history series): callers memoize it (MarketService.trackRecord).
 */
export function trackRecord(source: BacktestSource): TrackRecord {
  const src = withDaysMemo(source);
  const walk = runBacktest(src, { from: DEFAULT_FROM, to: src.asOf, walkForward: true });
  const liveFrom = CURRENT_LIVE_FROM;
  let live: TrackRecord['live'];
  if (src.asOf < liveFrom) {
    live = {
      from: liveFrom,
      to: null,
      days: 0,
      report: null,
      note: `${CURRENT_MODEL.version} was built on data through ${addDays(liveFrom, -1)}; the data of this deployment ends on ${src.asOf}, so there is no day after that to score yet.`,
    };
  } else {
    const report = runBacktest(src, { from: liveFrom, to: src.asOf });
    live = {
      from: liveFrom,
      to: src.asOf,
      days: report.pooled.days,
      report,
      note: `${CURRENT_MODEL.version} from ${liveFrom}, the first day after the data it was built on, through ${src.asOf}: recomputed from the stored data with the served code and bands, not a log of the answers served at the time; 30-day figures cover days with a known 30-day return.`,
    };
  }
  const byYear = backtestByYear(src, { from: DEFAULT_FROM, to: src.asOf, walkForward: true }).map(({ year, report }) => ({
    year,
    pooled: report.pooled,
    long_flat_sharpe_wins: { assets: sharpeWins(report.assets), of: report.assets.length },
  }));
  // Computed exactly (the Sharpe wins above included), rounded once as it is published.
  return roundFigures({ model_version: CURRENT_MODEL.version, walk_forward: walk, by_year: byYear, live });
}

/**
 * On how many of `assets` long/flat's Sharpe is at least buy-and-hold's (a window
 * without a position has no long/flat Sharpe: no win). Shared by the track record and its
 * Markdown (src/services/backtest-format.ts).
 */
export function sharpeWins(assets: readonly Pick<WindowMetrics, 'long_flat' | 'buy_and_hold'>[]): number {
  return assets.filter((a) => (a.long_flat.sharpe ?? -Infinity) >= (a.buy_and_hold.sharpe ?? Infinity)).length;
}
