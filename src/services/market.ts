import { CHAIN_HEALTH_METRICS, computeChainHealthSeries } from '../engine/chain-health.ts';
import { computeChainMetrics } from '../engine/chain-metrics.ts';
import { computeRegimeSeries, regimeAt } from '../engine/regime.ts';
import { computeSignalSeries, CURRENT_MODEL, type SignalModel, signalChanges } from '../engine/signal.ts';
import type { Candle, ChainHealthResult, ChainId, RegimeResult, SignalResult } from '../engine/types.ts';
import { assetNotFound, chainNotFound, invalidField, ServiceError } from '../errors.ts';
import { ASSETS, CHAINS, resolveAsset, resolveChain, type AssetInfo } from '../providers/assets.ts';
import { addDays, round } from '../engine/util.ts';
import { documentedGap } from '../providers/live/gaps.ts';
import type { MarketData, MarketDataProvider, SeriesFreshness } from '../providers/port.ts';
import type { HistoryRepo, StoredChange } from '../store/history-repo.ts';
import { staleness, staleReason, type FreshnessInput } from './freshness.ts';
import type { TrackRecordData } from './schemas/track-record.ts';
import { fresh, type Served } from './served.ts';
import { trackRecordOffThread } from './track-record-thread.ts';
import type {
  AssetsData,
  ChainHealthData,
  ChainMetricsData,
  HistoryData,
  RegimeData,
  SignalEntry,
  SignalsData,
  StatusData,
  PricesData,
} from './schemas/market.ts';

/** A payload with its JSON text, and whether it came from the cache (filled before this call). */
export type Cached<T> = Served<T>;

/** Index of the candle dated `date` searching backwards from `from`, or -1. */
function findDay(candles: Candle[], from: number, date: string): number {
  for (let i = from; i >= 0; i--) {
    const d = candles[i]!.date;
    if (d === date) return i;
    if (d < date) return -1;
  }
  return -1;
}

/** The `days` windows of GET /prices whose answers are memoized (the dashboard's and the default). */
const MEMO_PRICE_DAYS = new Set([30, 90, 180, 365]);

/** Options of the market service. */
export interface MarketOptions {
  /** `live` when the ingest job feeds the store (GET /status); default `offline`. */
  mode?: 'offline' | 'live';
  /** The day freshness is judged against (default: the as-of day); see MarketService.referenceDay. */
  referenceDay?: () => string;
  /** Bound on one computation of the track record, ms (default TRACK_RECORD_TIMEOUT_MS); read at each computation. */
  trackRecordTimeoutMs?: number;
}

/** Every series computed from one MarketData. */
interface MarketState {
  data: MarketData;
  regimeSeries: RegimeResult[];
  chainHealthSeries: Map<ChainId, ChainHealthResult[]>;
  signalSeries: Map<string, SignalResult[]>;
  /** The served model's series by model (key: the model as JSON). */
  models: Map<string, Map<string, SignalResult[]>>;
}

/** The chain's health on each of `dates` (ascending), from the stored metrics and the regime series. */
function chainHealthOn(data: MarketData, regimeSeries: RegimeResult[], chain: ChainId, dates: string[]): ChainHealthResult[] {
  const metrics: Record<string, { date: string; value: number }[]> = {};
  for (const [m, s] of Object.entries(data.chains.get(chain) ?? {})) metrics[m] = s.points;
  const regimeByDate = (d: string) => regimeAt(regimeSeries, d)?.regime ?? 'neutral';
  return computeChainHealthSeries({ chain, metrics, regimeByDate, dates });
}

/** Computes the whole-history regime, chain-health and signal series of `data`. */
function computeState(data: MarketData): MarketState {
  const regimeSeries = computeRegimeSeries({
    btc: data.candles.get('bitcoin') ?? [],
    fearGreed: data.fearGreed,
    funding: data.funding.get('bitcoin') ?? [],
  });
  const chainHealthSeries = new Map<ChainId, ChainHealthResult[]>();
  const signalSeries = new Map<string, SignalResult[]>();
  for (const c of CHAINS) {
    const dates = (data.candles.get(c.asset) ?? []).map((x) => x.date);
    if (dates.at(-1) !== data.asOf) dates.push(data.asOf);
    chainHealthSeries.set(c.chain, chainHealthOn(data, regimeSeries, c.chain, dates));
  }
  const state: MarketState = { data, regimeSeries, chainHealthSeries, signalSeries, models: new Map() };
  for (const [asset, series] of signalSeriesOf(state, CURRENT_MODEL)) signalSeries.set(asset, series);
  return state;
}

/**
 * The signal series of every asset with data under `model` (computed point-in-time, each
 * day from data up to that day). The served model's series is computed once per state and
 * kept; other models (the backtest's parameter sets) are computed on each call.
 */
function signalSeriesOf(state: MarketState, model: SignalModel): Map<string, SignalResult[]> {
  const key = JSON.stringify(model);
  const hit = state.models.get(key);
  if (hit) return hit;
  const { data } = state;
  const out = new Map<string, SignalResult[]>();
  for (const a of data.assets) {
    const candles = data.candles.get(a.asset) ?? [];
    if (candles.length === 0) continue;
    const funding = data.funding.get(a.asset) ?? null;
    out.set(
      a.asset,
      computeSignalSeries(
        {
          asset: a.asset,
          candles,
          fearGreed: data.fearGreed,
          funding,
          regime: state.regimeSeries,
          chainHealth: a.chain ? (state.chainHealthSeries.get(a.chain) ?? null) : null,
          sources: {
            prices: data.priceSources.get(a.asset) ?? 'dataset',
            fear_greed: data.fearGreedSource,
            funding: funding ? (data.fundingSources.get(a.asset) ?? null) : null,
            chain_health: a.chain ? `chain health of ${a.chain} (see /chain-health/${a.chain})` : null,
          },
        },
        model,
      ),
    );
  }
  if (model === CURRENT_MODEL) state.models.set(key, out);
  return out;
}

/** The first day a signal-history window may end on (nothing is stored earlier; PostgreSQL has no year 0). */
export const HISTORY_EPOCH = '1970-01-01';

/**
 * A `source` string as of `day`: each part (`; `-separated) with a date range `A..B` is cut to
 * `A..day` when B is later, and left out when A is later; parts without a range stay. E.g.
 * `data/prices/btc.csv (binance_spot) 2018-03-17..2025-09-30; Wilder RSI-14 of daily closes`
 * as of 2021-05-04 reads `... 2018-03-17..2021-05-04; Wilder RSI-14 of daily closes`.
 */
export function sourceUpTo(source: string, day: string): string {
  return source
    .split('; ')
    .flatMap((part) => {
      const m = /(\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2})/.exec(part);
      if (!m) return [part];
      if (m[1]! > day) return [];
      return [m[2]! > day ? part.replace(m[0], `${m[1]}..${day}`) : part];
    })
    .join('; ');
}

/**
 * The market-intelligence service layer shared by REST and MCP: signals, regime, chain
 * health, chain metrics, assets and signal history, all computed point-in-time from the
 * provider's data as of one UTC day. Whole-history series are computed once at creation;
 * answers are memoized per question (data is immutable for a given as-of day).
 */
export class MarketService {
  #state: MarketState;
  /** Answers by question, as served from the cache (one object per answer, so edges can memoize on it, e.g. its ETag). */
  #memo = new Map<string, Cached<unknown>>();
  /**
   * The track record of the current data, computed or being computed (`trackRecord`); reset by
   * `reload`, not by a change of the reference day (it depends on the data only).
   */
  #trackRecord: Promise<Cached<TrackRecordData>> | null = null;
  /** The reference day the memo was filled for (see `referenceDay`). */
  #memoReference = '';

  private constructor(
    data: MarketData,
    private readonly history: HistoryRepo | null,
    private readonly options: MarketOptions,
  ) {
    this.#state = computeState(data);
  }

  /** The data the answers are computed from, cut at the as-of day. */
  get data(): MarketData {
    return this.#state.data;
  }
  /** The as-of day (YYYY-MM-DD): the newest day of the data served. */
  get asOf(): string {
    return this.#state.data.asOf;
  }
  /** BTC regime per day, oldest first. */
  get regimeSeries(): RegimeResult[] {
    return this.#state.regimeSeries;
  }
  /** Chain health per chain and day. */
  get chainHealthSeries(): Map<ChainId, ChainHealthResult[]> {
    return this.#state.chainHealthSeries;
  }
  /** Signal per asset and day. */
  get signalSeries(): Map<string, SignalResult[]> {
    return this.#state.signalSeries;
  }

  /** `live` when the ingest job feeds the store, else `offline`. */
  get mode(): 'offline' | 'live' {
    return this.options.mode ?? 'offline';
  }

  /**
   * The signal series of every asset with data under `model`, computed point-in-time (the
   * served model's is computed once per state; the backtest's parameter sets on each call).
   */
  seriesFor(model: SignalModel): Map<string, SignalResult[]> {
    return signalSeriesOf(this.#state, model);
  }

  /**
   * The day freshness is judged against: in live mode the newest complete UTC day by the
   * clock, offline the as-of day (docs/live-data.md, "Freshness").
   */
  referenceDay(): string {
    return this.options.referenceDay?.() ?? this.asOf;
  }

  /**
   * Replaces the series' freshness records (after an ingest round that stored nothing new,
   * e.g. a failed fetch), without recomputing: GET /status shows them at once.
   */
  updateSeriesStatus(series: SeriesFreshness[]): void {
    this.#state = { ...this.#state, data: { ...this.#state.data, series } };
    this.#memo.delete('status');
  }

  /** Freshness of every market series (GET /status). */
  status(): Cached<StatusData> {
    return this.#cached('status', () => {
      const ref = this.referenceDay();
      const series = this.data.series.map((x) => {
        const label =
          x.kind === 'metric' ? `${x.subject} ${x.metric}` : x.kind === 'fear_greed' ? 'Fear & Greed index' : (x.subject ?? x.series);
        const gap = documentedGap(x.series);
        const reason = staleReason({ label, kind: x.kind, newest: x.newest_date, cadenceHours: x.cadence_hours }, ref);
        // Live, a documented gap's data ends with the bundled dataset: the reason says it will not catch up.
        const why = reason && gap && this.mode === 'live' ? `${reason}; no live source fetches it (see no_live_source)` : reason;
        return { ...x, no_live_source: gap, stale: why !== null, stale_reason: why };
      });
      return {
        mode: this.mode,
        as_of: this.asOf,
        reference_date: ref,
        stale_series: series.filter((x) => x.stale).length,
        empty_series: series.filter((x) => x.newest_date === null).length,
        series,
      };
    });
  }

  /**
   * Recomputes every series from new data and swaps it in at once (the live ingest, after it
   * stored new rows): requests see either the old or the new state, never a mix.
   */
  reload(data: MarketData): void {
    const next = computeState(data);
    this.#state = next;
    this.#memo = new Map();
    this.#trackRecord = null;
  }

  /**
   * Loads the provider's data as of `asOf` (default: its newest day) and computes every
   * series. `history` may be null for computations that need no storage (benchmarks, tests).
   * @throws what `provider.load` throws: RangeError when `asOf` is before the data starts
   *   (with the store's provider also AsOfOutOfRangeError, a RangeError, when it is after the
   *   newest day, or a RangeError when nothing is stored), DataValidationError on malformed data.
   */
  static async create(
    provider: MarketDataProvider,
    history: HistoryRepo | null,
    asOf?: string,
    options: MarketOptions = {},
  ): Promise<MarketService> {
    return new MarketService(await provider.load(asOf), history, options);
  }

  #cached<T>(key: string, build: () => T): Cached<T> {
    const ref = this.referenceDay();
    if (ref !== this.#memoReference) {
      this.#memo = new Map();
      this.#memoReference = ref;
    }
    const hit = this.#memo.get(key);
    if (hit) return hit as Cached<T>;
    const value = build();
    const json = JSON.stringify(value);
    this.#memo.set(key, { value, json, cached: true });
    return { value, json, cached: false };
  }

  /** Fills the memo for the public questions, so the first requests are served from cache. */
  warm(): void {
    this.signals(false);
    this.signals(true);
    this.regime();
    this.chainHealth();
    this.assets();
  }

  /** Whether `asked` names a supported asset (id or ticker, any case), as the asset routes resolve it. */
  isKnownAsset(asked: string): boolean {
    return resolveAsset(asked) !== undefined;
  }

  #resolve(asked: string): AssetInfo {
    const a = resolveAsset(asked);
    if (!a) throw assetNotFound(asked, ASSETS);
    return a;
  }

  /** The newest visible day of a chain metric, or null. */
  #metricNewest(chain: ChainId, metric: string): string | null {
    return this.data.chains.get(chain)?.[metric]?.points.at(-1)?.date ?? null;
  }

  /** The inputs of a chain's health: the metrics it weighs, with their newest days. */
  #chainInputs(chain: ChainId): FreshnessInput[] {
    return CHAIN_HEALTH_METRICS[chain].map((m) => ({
      label: `${chain} ${m.metric}`,
      kind: 'metric' as const,
      newest: this.#metricNewest(chain, m.metric),
    }));
  }

  /** An asset's daily prices as a freshness input, labelled with its ticker (`label`). */
  #candlesInput(asset: string, label: string): FreshnessInput {
    return { label, kind: 'candles', newest: this.data.candles.get(asset)?.at(-1)?.date ?? null };
  }

  /** The Fear & Greed index as a freshness input. */
  #fearGreedInput(): FreshnessInput {
    return { label: 'Fear & Greed index', kind: 'fear_greed', newest: this.data.fearGreed.at(-1)?.date ?? null };
  }

  /** An asset's funding rates as a freshness input, labelled with its ticker (`label`). */
  #fundingInput(asset: string, label: string): FreshnessInput {
    return { label, kind: 'funding', newest: this.data.funding.get(asset)?.at(-1)?.date ?? null };
  }

  /** The inputs of an asset's signal: its prices, Fear & Greed, its funding rates and its chain's metrics. */
  #assetInputs(a: AssetInfo): FreshnessInput[] {
    const inputs: FreshnessInput[] = [this.#candlesInput(a.asset, a.symbol), this.#fearGreedInput()];
    if (this.data.funding.has(a.asset)) inputs.push(this.#fundingInput(a.asset, a.symbol));
    if (a.chain) inputs.push(...this.#chainInputs(a.chain));
    return inputs;
  }

  /**
   * The current signal entry of an asset, or the reason it is unavailable: no candles on or
   * before the as-of day, or candles older than the prices' cadence allows (never served as
   * current).
   */
  #entry(a: AssetInfo, includeFactors: boolean): SignalEntry | string {
    const series = this.signalSeries.get(a.asset);
    const candles = this.data.candles.get(a.asset);
    const last = series?.at(-1);
    if (!series || !candles || !last) return `no price data on or before ${this.asOf}`;
    const ref = this.referenceDay();
    const priceStale = staleReason(this.#candlesInput(a.asset, a.symbol), ref);
    if (priceStale) return `stale: ${priceStale}; not served as current`;
    const i = candles.length - 1;
    const close = candles[i]!.close;
    const pct = (days: number) => {
      const j = findDay(candles, i - 1, addDays(candles[i]!.date, -days));
      return j < 0 ? null : round((close / candles[j]!.close - 1) * 100, 4);
    };
    let since = last.as_of;
    for (let k = series.length - 2; k >= 0 && series[k]!.signal === last.signal; k--) since = series[k]!.as_of;
    const entry: SignalEntry = {
      asset: a.asset,
      symbol: a.symbol,
      name: a.name,
      signal: last.signal,
      score: last.score,
      confidence: last.confidence,
      price_usd: close,
      change_24h_pct: pct(1),
      change_7d_pct: pct(7),
      since,
      as_of: last.as_of,
      model_version: CURRENT_MODEL.version,
      level_rule: last.level_rule,
      ...staleness(this.#assetInputs(a), ref),
    };
    if (includeFactors) {
      entry.factors = last.factors;
      entry.missing_factors = last.missing_factors;
    }
    return entry;
  }

  /** Signals of all assets (GET /signals). Assets without data at the as-of day are listed as unavailable. */
  signals(includeFactors: boolean): Cached<SignalsData> {
    return this.#cached(`signals:${includeFactors}`, () => {
      const signals: SignalEntry[] = [];
      const unavailable: SignalsData['unavailable'] = [];
      for (const a of this.data.assets) {
        const e = this.#entry(a, includeFactors);
        if (typeof e !== 'string') signals.push(e);
        else unavailable.push({ asset: a.asset, reason: e, newest_date: this.data.candles.get(a.asset)?.at(-1)?.date ?? null });
      }
      return { signals, unavailable };
    });
  }

  /**
   * Signal of one asset (GET /signals/{asset}); `asked` is an id or ticker, any case.
   * @throws ServiceError NOT_FOUND for an unknown asset or one with no data at the as-of day.
   */
  signal(asked: string, includeFactors: boolean): Cached<SignalEntry> {
    const a = this.#resolve(asked);
    return this.#cached(`signal:${a.asset}:${includeFactors}`, () => {
      const e = this.#entry(a, includeFactors);
      if (typeof e === 'string') {
        throw new ServiceError(
          'NOT_FOUND',
          `Asset '${asked}' has no current signal: ${e}. GET /api/v1/status shows the freshness of every series`,
          {
            newest_date: this.data.candles.get(a.asset)?.at(-1)?.date ?? null,
          },
        );
      }
      return e;
    });
  }

  /**
   * The BTC regime with its conditions and all signals (GET /regime).
   * @throws ServiceError SERVICE_UNAVAILABLE when BTC has no data at the as-of day.
   */
  regime(): Cached<RegimeData> {
    return this.#cached('regime', () => {
      const r = this.regimeSeries.at(-1);
      if (!r) throw new ServiceError('SERVICE_UNAVAILABLE', `No BTC data on or before ${this.asOf}`);
      return {
        regime: r.regime,
        score: r.score,
        confidence: r.confidence,
        since: r.since,
        as_of: r.as_of,
        ...staleness(
          [this.#candlesInput('bitcoin', 'BTC'), this.#fearGreedInput(), this.#fundingInput('bitcoin', 'BTC')],
          this.referenceDay(),
        ),
        conditions: r.conditions,
        signals: this.signals(false).value.signals,
      };
    });
  }

  /**
   * The chain's health at the reference day: the series' last result, or, in live mode when
   * the reference day is past the data's as-of day (a failing source), the health evaluated
   * at the reference day, where metrics older than CHAIN_STALENESS_DAYS count as missing
   * (docs/methodology.md, "Chain health"): an old value must not pass for current health.
   */
  #chainHealthNow(chain: ChainId): ChainHealthResult {
    const last = this.chainHealthSeries.get(chain)!.at(-1)!;
    const ref = this.referenceDay();
    return ref <= last.date ? last : chainHealthOn(this.data, this.regimeSeries, chain, [ref])[0]!;
  }

  #health(chain: ChainId): ChainHealthData {
    const c = CHAINS.find((x) => x.chain === chain)!;
    const { date: _computedFor, ...h } = this.#chainHealthNow(chain);
    // The score is adjusted for the BTC regime in force at the day: the newest one, from BTC's
    // newest candle, however old. Its prices are an input too, so an old regime is reported.
    const inputs = [...this.#chainInputs(chain), this.#candlesInput('bitcoin', 'BTC')];
    return { ...h, name: c.name, ...staleness(inputs, this.referenceDay()) };
  }

  /** Health of eth, sol and hype (GET /chain-health). */
  chainHealth(): Cached<{ chains: ChainHealthData[] }> {
    return this.#cached('chain-health', () => ({ chains: CHAINS.map((c) => this.#health(c.chain)) }));
  }

  /**
   * Health of one chain (GET /chain-health/{asset}).
   * @throws ServiceError NOT_FOUND for anything but eth, sol, hype (or their asset ids/tickers),
   *   naming them (details.chains).
   */
  chainHealthOf(asked: string): Cached<ChainHealthData> {
    const c = resolveChain(asked);
    if (!c) throw chainNotFound(asked, CHAINS);
    return this.#cached(`chain-health:${c.chain}`, () => this.#health(c.chain));
  }

  /**
   * Raw chain metrics with 7-day deltas (GET /chain-metrics/{asset}). Every metric the
   * dataset knows for the chain is present; one without data has `value: null`.
   * @throws ServiceError NOT_FOUND for anything but eth, sol, hype, naming them (details.chains).
   */
  chainMetrics(asked: string): Cached<ChainMetricsData> {
    const c = resolveChain(asked);
    if (!c) throw chainNotFound(asked, CHAINS);
    return this.#cached(`chain-metrics:${c.chain}`, () => {
      const series = this.data.chains.get(c.chain) ?? {};
      const pts: Record<string, { date: string; value: number }[]> = {};
      for (const [m, s] of Object.entries(series)) pts[m] = s.points;
      const computed = computeChainMetrics(pts, this.asOf);
      const metrics: ChainMetricsData['metrics'] = {};
      const ref = this.referenceDay();
      const reasons: string[] = [];
      for (const [m, v] of Object.entries(computed)) {
        const reason = staleReason({ label: `${c.chain} ${m}`, kind: 'metric', newest: v.as_of }, ref);
        if (reason) reasons.push(reason);
        metrics[m] = {
          value: v.value,
          // The difference of two decimals carries binary noise (0.442 read as 0.44199999999999995):
          // rounded to 12 significant digits (the values themselves are served as stored).
          change_7d: v.change_7d === null ? null : Number(v.change_7d.toPrecision(12)),
          change_7d_pct: v.change_7d_pct === null ? null : round(v.change_7d_pct, 4),
          as_of: v.as_of,
          stale: reason !== null,
          stale_reason: reason,
          source: series[m]?.source ?? 'dataset',
        };
      }
      return {
        chain: c.chain,
        name: c.name,
        as_of: this.asOf,
        stale: reasons.length > 0,
        stale_reason: reasons.length ? reasons.join('; ') : null,
        metrics,
      };
    });
  }

  /**
   * Which data an asset has beyond its candles, as of the served day: a chain (chain health
   * score and chain metrics: ETH, SOL, HYPE) and a funding-rate series. The one predicate behind
   * GET /assets `capabilities` and the metrics a thesis condition may use (ThesisService.create).
   */
  dataCapabilities(a: AssetInfo): { chain_health: boolean; chain_metrics: boolean; funding_rate: boolean } {
    return { chain_health: a.chain !== null, chain_metrics: a.chain !== null, funding_rate: this.data.funding.has(a.asset) };
  }

  /** Supported assets with their current signal and capability flags (GET /assets). */
  assets(): Cached<AssetsData> {
    return this.#cached('assets', () => ({
      assets: this.data.assets.map((a) => {
        const got = this.#entry(a, false);
        const e = typeof got === 'string' ? null : got;
        const candles = this.data.candles.get(a.asset) ?? [];
        return {
          asset: a.asset,
          symbol: a.symbol,
          name: a.name,
          signal: e?.signal ?? null,
          score: e?.score ?? null,
          price_usd: e?.price_usd ?? null,
          chain: a.chain,
          data_from: candles[0]?.date ?? null,
          data_to: candles.at(-1)?.date ?? null,
          capabilities: {
            signals: e !== null,
            factors: e !== null,
            // The stored changes are served whether or not the signal is current (live mode with a stale source).
            signal_history: (this.signalSeries.get(a.asset)?.length ?? 0) > 0,
            ...this.dataCapabilities(a),
            thesis: e !== null,
          },
        };
      }),
    }));
  }

  /**
   * Daily OHLCV candles of one asset for the `days` days ending at the as-of day, oldest
   * first, as the provider has them (GET /prices/{asset}), with the signal level in effect at
   * the first candle and the level changes inside the window (from `changes`, the same
   * point-in-time changes the backfill stores). `asked` is an id or ticker, any case.
   * @throws ServiceError NOT_FOUND for an unknown asset or one with no candles on or before the as-of day.
   */
  prices(asked: string, days: number): Cached<PricesData> {
    const a = this.#resolve(asked);
    // Only the usual windows are memoized: one entry per asset and `days` would let a client grow the memo 365-fold.
    const cache = MEMO_PRICE_DAYS.has(days)
      ? <T>(key: string, build: () => T) => this.#cached(key, build)
      : <T>(_key: string, build: () => T) => fresh(build());
    return cache(`prices:${a.asset}:${days}`, () => {
      const all = this.data.candles.get(a.asset) ?? [];
      if (all.length === 0) throw new ServiceError('NOT_FOUND', `Asset '${asked}' has no price data on or before ${this.asOf}`);
      const from = addDays(this.asOf, -(days - 1));
      const candles = all
        .filter((c) => c.date >= from)
        .map((c) => ({ date: c.date, open: c.open, high: c.high, low: c.low, close: c.close, volume: c.volume }));
      const first = candles[0]?.date ?? this.asOf;
      let atStart: PricesData['signal_at_start'] = null;
      for (const s of this.signalSeries.get(a.asset) ?? []) {
        if (s.as_of > first) break;
        atStart = s.signal;
      }
      const signal_changes = this.changes(a.asset)
        .filter((c) => c.changed_at > first)
        .map((c) => ({ date: c.changed_at, signal: c.signal, previous_signal: c.previous_signal }));
      return {
        asset: a.asset,
        symbol: a.symbol,
        days,
        as_of: all.at(-1)!.date,
        source: this.data.priceSources.get(a.asset) ?? 'dataset',
        candles,
        signal_at_start: atStart,
        signal_changes,
        ...staleness([this.#candlesInput(a.asset, a.symbol)], this.referenceDay()),
      };
    });
  }

  /**
   * The published track record (GET /track-record): the walk-forward backtest and the live
   * period of the served model. Computed on first use after a start or a reload, in a worker
   * thread (services/track-record-thread.ts: 2.2-2.8 s on an otherwise idle 2-core machine,
   * longer under load; a whole-history series per parameter set of the walk-forward; on the
   * main thread it held every other request for 2-2.6 s), then served from the memo until the
   * next reload. Concurrent first requests share one computation
   * (`cached` is false only for the request that started it).
   * @throws ServiceError SERVICE_UNAVAILABLE when the worker fails or takes longer than
   *   TRACK_RECORD_TIMEOUT_MS (nothing is memoized then: the next request tries again).
   */
  async trackRecord(): Promise<Cached<TrackRecordData>> {
    if (this.#trackRecord !== null) return this.#trackRecord;
    // The answer of every later request is one object (`cached: true`), so edges that memoize
    // per answer object (the ETag) compute once; the request that started it gets its own.
    const computing = trackRecordOffThread(this.#state.data, this.options.trackRecordTimeoutMs).then((value) => ({
      value,
      json: JSON.stringify(value),
      cached: true,
    }));
    this.#trackRecord = computing;
    computing.catch(() => {
      if (this.#trackRecord === computing) this.#trackRecord = null;
    });
    const served = await computing;
    return { ...served, cached: false };
  }

  /**
   * The signal changes of every asset, computed point-in-time (each from data up to its own
   * day), oldest first.
   */
  changes(asset: string): StoredChange[] {
    const series = this.signalSeries.get(asset);
    const candles = this.data.candles.get(asset);
    if (!series || !candles) return [];
    return signalChanges(series, candles) as StoredChange[];
  }

  /**
   * Stored signal changes of one asset in the `days` days ending at `end` (YYYY-MM-DD, default
   * the as-of day), newest first, at most `limit` (GET /signal-history/{asset}). A window
   * before the asset's first change is answered with no entries.
   * @throws ServiceError NOT_FOUND for an unknown asset; INVALID_PARAMETER (field `end`) when
   *   `end` is after the as-of day (the history is point-in-time: nothing later is served).
   */
  async signalHistory(asked: string, days: number, limit: number, end?: string): Promise<Cached<HistoryData>> {
    const a = this.#resolve(asked);
    if (end !== undefined && end > this.asOf)
      throw invalidField('end', `${end} is after the as-of day ${this.asOf}; give ${this.asOf} or earlier (or leave it out)`);
    if (!this.history) throw new ServiceError('SERVICE_UNAVAILABLE', 'Signal history storage is not available');
    const to = end ?? this.asOf; // not before HISTORY_EPOCH (HistoryEnd refuses earlier days)
    const from = addDays(to, -(days - 1));
    // One query for the page and for whether anything older is stored: the newest limit + 1
    // changes up to `to`; those in the window (at most `limit`) are the page, any other is older.
    const rows = await this.history.listChanges(a.asset, HISTORY_EPOCH, to, limit + 1, CURRENT_MODEL.version);
    const page = rows.filter((e) => e.changed_at >= from).slice(0, limit);
    // A snapshot was computed from the data up to its day: its sources say so.
    const entries = page.map((e) => ({ ...e, factors: e.factors.map((f) => ({ ...f, source: sourceUpTo(f.source, e.changed_at) })) }));
    // The next page ends on the newest change older than this page (rows are newest first, and
    // the page is their prefix), so paging back never asks for an empty window; null when no
    // older change is stored, so a client paging back knows it has them all.
    const next_end = rows[page.length]?.changed_at ?? null;
    return fresh<HistoryData>({ asset: a.asset, days, limit, from, to, next_end, model_version: CURRENT_MODEL.version, entries });
  }
}
