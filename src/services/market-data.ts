import type { Candle, ChainId, FundingPoint } from '../engine/types.ts';
import { ASSETS } from '../providers/assets.ts';
import { cut, findGaps, incompleteBundled } from '../providers/dataset/dataset.ts';
import type { DataGap, MarketData, MarketDataProvider, MetricSeries, SeriesFreshness } from '../providers/port.ts';
import type { MarketCache } from '../store/market-cache.ts';
import type { MarketRepo, SeriesState, StoredMarket } from '../store/market-repo.ts';
import { isoTimestamp } from '../store/timestamps.ts';

/**
 * Raised when AS_OF is outside the stored data (live ingest may extend it, so the range is
 * known only once the store is open). The message reads like the other configuration errors
 * (config.ts): `Invalid configuration:`, the reason naming the first or newest day, what to do.
 */
export class AsOfOutOfRangeError extends RangeError {
  override name = 'AsOfOutOfRangeError';
  constructor(reason: string) {
    super(`Invalid configuration:\n  ${reason}\nFix this variable in the environment (or --as-of) and start again.`);
  }
}

/**
 * Refuses an AS_OF after `latest`, the newest day of the data (the one wording of this refusal:
 * at start-up before the import, from the bundled files and the store, and when the data is cut).
 * @throws AsOfOutOfRangeError when `asOf` > `latest`.
 */
export function assertAsOfNotAfter(asOf: string, latest: string): void {
  if (asOf > latest)
    throw new AsOfOutOfRangeError(`AS_OF ${asOf} is after the newest day of the data (${latest}); use ${latest} or earlier`);
}

/**
 * Refuses, before the bundled dataset's import, an AS_OF after the newest day of prices the
 * store will hold once the import has run: the later of the bundled files' newest price day
 * (read from their last lines) and the newest candle day already stored (one query; a live
 * ingest may have stored newer days). Costs milliseconds where the first import costs seconds.
 * @throws AsOfOutOfRangeError when `asOf` is after both.
 */
export async function checkAsOfBeforeImport(
  asOf: string,
  bundled: { newestPriceDay(): Promise<string | null> },
  repo: Pick<MarketRepo, 'seriesStates'>,
): Promise<void> {
  const [files, states] = await Promise.all([bundled.newestPriceDay(), repo.seriesStates()]);
  let latest = files;
  for (const s of states)
    if (s.kind === 'candles' && s.newestDate !== null && (latest === null || s.newestDate > latest)) latest = s.newestDate;
  // No price at all: left to the load, which says the data is missing.
  if (latest !== null) assertAsOfNotAfter(asOf, latest);
}

/**
 * Provenance of a series of rows as consecutive segments of the same source, e.g.
 * `data/prices/btc.csv (binance_spot) 2018-03-17..2025-09-30; Binance spot /api/v3/klines 2025-10-01..2025-10-05`.
 */
export function sourceSegments(rows: readonly { date: string; source: string }[]): string {
  const out: string[] = [];
  let start = 0;
  for (let i = 1; i <= rows.length; i++) {
    if (i === rows.length || rows[i]!.source !== rows[start]!.source) {
      out.push(`${rows[start]!.source} ${rows[start]!.date}..${rows[i - 1]!.date}`);
      start = i;
    }
  }
  return out.join('; ');
}

/** A bundled row the dataset leaves out as incomplete (a row of another source is kept). */
function isLeftOut(left: ReturnType<typeof incompleteBundled>, p: { date: string; value: number; source: string }): boolean {
  return left.has(p.date, p.value) && p.source.includes('data/chains/');
}

/**
 * A metric with a bundled point the dataset leaves out: its stored newest day may be that
 * point (a store imported before it was left out), so it is read from the filtered rows.
 */
function hasLeftOut(s: SeriesState): boolean {
  return s.kind === 'metric' && !!s.subject && !!s.metric && incompleteBundled(s.subject, s.metric).any;
}

/** A stored series state in the port's shape. */
export function toFreshness(s: SeriesState): SeriesFreshness {
  return {
    series: s.series,
    kind: s.kind,
    subject: s.subject,
    metric: s.metric,
    source: s.source,
    origin: s.origin,
    cadence_hours: s.cadenceHours,
    newest_date: s.newestDate,
    // ISO 8601 like every timestamp the API serves (the store, and a market cache written by
    // an earlier version, hold PostgreSQL's text form, e.g. `2026-11-27 17:35:07.887+00`).
    last_success_at: isoTimestamp(s.lastSuccessAt),
    last_error: s.lastError,
    last_error_at: isoTimestamp(s.lastErrorAt),
  };
}

/**
 * The market-data provider over the store (docs/live-data.md): the engine reads the candles,
 * Fear & Greed, funding and chain metrics stored in the database (imported from the bundled
 * dataset at first start, extended by the live ingest), cut at the as-of day.
 */
export class StoredMarketProvider implements MarketDataProvider {
  readonly name = 'store';

  /** Where the last load read the market data: the cache file or the store's tables (null before a load). */
  lastFrom: 'cache' | 'store' | null = null;
  /** The cache write of the last load that read the store (settled when done; never rejects). */
  written: Promise<void> = Promise.resolve();

  /**
   * @param cache when given, loads go through it (MarketRepo.loadAllCached; the embedded
   *   database's start-up, src/core.ts), and a failed cache write is reported to `onWriteError`.
   */
  constructor(
    private readonly repo: MarketRepo,
    private readonly cache: { cache: MarketCache<StoredMarket>; onWriteError: (e: unknown) => void } | null = null,
  ) {}

  /**
   * Loads everything stored and cuts it at `asOf` (default: the newest candle day stored).
   * @throws AsOfOutOfRangeError when `asOf` is before the first candle or after the newest
   *   one, naming that day; RangeError when nothing is stored.
   */
  async load(asOf?: string): Promise<MarketData> {
    if (!this.cache) {
      this.lastFrom = 'store';
      return buildMarketData(await this.repo.loadAll(), asOf);
    }
    const { data, from, written } = await this.repo.loadAllCached(this.cache.cache, this.cache.onWriteError);
    this.lastFrom = from;
    this.written = written;
    return buildMarketData(data, asOf);
  }
}

/**
 * Builds the engine's view from stored rows, cut at `asOf` (see StoredMarketProvider.load).
 * @throws AsOfOutOfRangeError / RangeError as described there.
 */
export function buildMarketData(stored: StoredMarket, asOf?: string): MarketData {
  let first: string | null = null;
  let latest: string | null = null;
  for (const list of stored.candles.values()) {
    if (!list.length) continue;
    if (first === null || list[0]!.date < first) first = list[0]!.date;
    if (latest === null || list.at(-1)!.date > latest) latest = list.at(-1)!.date;
  }
  if (first === null || latest === null) throw new RangeError('No market data is stored (the bundled dataset import did not run)');
  const day = asOf ?? latest;
  if (day < first) throw new AsOfOutOfRangeError(`AS_OF ${day} is before the first day of the data (${first})`);
  assertAsOfNotAfter(day, latest);

  const states = new Map(stored.series.map((s) => [s.series, s]));
  const gaps: DataGap[] = [];
  const candles = new Map<string, Candle[]>();
  const priceSources = new Map<string, string>();
  for (const [asset, rows] of stored.candles) {
    const visible = cut(rows, day);
    candles.set(
      asset,
      visible.map(({ source: _s, ...c }) => c),
    );
    priceSources.set(asset, visible.length ? sourceSegments(visible) : (states.get(`candles:${asset}`)?.source ?? 'store'));
    gaps.push(
      ...findGaps(
        `prices/${asset}`,
        visible.map((c) => c.date),
      ),
    );
  }
  const fg = cut(stored.fearGreed, day);
  gaps.push(
    ...findGaps(
      'fear_greed',
      fg.map((p) => p.date),
    ),
  );
  const funding = new Map<string, FundingPoint[]>();
  const fundingSources = new Map<string, string>();
  for (const [asset, rows] of stored.funding) {
    const visible = cut(rows, day);
    if (!visible.length) continue;
    funding.set(
      asset,
      visible.map((p) => ({ date: p.date, rate: p.rate })),
    );
    fundingSources.set(asset, sourceSegments(visible));
    gaps.push(
      ...findGaps(
        `funding/${asset}`,
        visible.map((p) => p.date),
      ),
    );
  }
  const chains = new Map<ChainId, Record<string, MetricSeries>>();
  for (const s of stored.series) {
    if (s.kind !== 'metric' || !s.subject || !s.metric) continue;
    const chain = s.subject as ChainId;
    const left = incompleteBundled(chain, s.metric);
    let rows = cut(stored.metrics.get(chain)?.get(s.metric) ?? [], day);
    if (left.any) rows = rows.filter((p) => !isLeftOut(left, p));
    let rec = chains.get(chain);
    if (!rec) chains.set(chain, (rec = {}));
    rec[s.metric] = {
      points: rows.map((p) => ({ date: p.date, value: p.value })),
      source: rows.length ? sourceSegments(rows) + left.note(day) : s.source,
    };
  }
  /** A series' newest day on or before the as-of day, read from the cut data above. */
  const newestVisible = (s: SeriesState): string | null => {
    const last = (rows: readonly { date: string }[] | undefined) => rows?.at(-1)?.date ?? null;
    switch (s.kind) {
      case 'candles':
        return last(candles.get(s.subject!));
      case 'fear_greed':
        return last(fg);
      case 'funding':
        return last(funding.get(s.subject!));
      case 'metric':
        return last(chains.get(s.subject as ChainId)?.[s.metric!]?.points);
    }
  };
  return {
    asOf: day,
    latestDate: latest,
    assets: ASSETS,
    candles,
    priceSources,
    fearGreed: fg.map(({ source: _s, ...p }) => p),
    fearGreedSource: fg.length ? sourceSegments(fg) : (states.get('fear_greed')?.source ?? 'store'),
    funding,
    fundingSources,
    chains,
    gaps,
    // With AS_OF, freshness as of that day: a series' newest day is its newest on or before it.
    // Without (offline newest day, live mode) each series shows its own newest stored day, as
    // the live ingest's status updates do (a series ahead of the candles is not cut back).
    // A store imported before a bundled point was left out still records it as the newest day.
    series: stored.series.map((s) =>
      asOf === undefined && !hasLeftOut(s) ? toFreshness(s) : { ...toFreshness(s), newest_date: newestVisible(s) },
    ),
  };
}
