import { computeChainHealthSeries } from '../engine/chain-health.ts';
import { computeChainMetrics } from '../engine/chain-metrics.ts';
import { computeRegimeSeries, regimeAt } from '../engine/regime.ts';
import { computeSignalSeries, CURRENT_MODEL, type SignalModel, signalChanges } from '../engine/signal.ts';
import type { Candle, ChainHealthResult, ChainId, RegimeResult, SignalResult } from '../engine/types.ts';
import { assetNotFound, chainNotFound, ServiceError } from '../errors.ts';
import { CHAINS, resolveAsset, resolveChain, type AssetInfo } from '../providers/assets.ts';
import { addDays, round } from '../engine/util.ts';
import type { MarketData, MarketDataProvider } from '../providers/port.ts';
import type { HistoryRepo, StoredChange } from '../store/history-repo.ts';
import { trackRecord } from './backtest.ts';
import type { TrackRecordData } from './schemas/track-record.ts';
import { fresh, type Served } from './served.ts';
import type { AssetsData, ChainHealthData, ChainMetricsData, HistoryData, RegimeData, SignalEntry, SignalsData } from './schemas/market.ts';

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

/**
 * The market-intelligence service layer shared by REST and MCP: signals, regime, chain
 * health, chain metrics, assets and signal history, all computed point-in-time from the
 * provider's data as of one UTC day. Whole-history series are computed once at creation;
 * answers are memoized per question (data is immutable for a given as-of day).
 */
export class MarketService {
  readonly asOf: string;
  readonly regimeSeries: RegimeResult[];
  readonly chainHealthSeries = new Map<ChainId, ChainHealthResult[]>();
  readonly signalSeries = new Map<string, SignalResult[]>();
  /** Answers by question, as served from the cache (one object per answer, so edges can memoize on it, e.g. its ETag). */
  readonly #memo = new Map<string, Cached<unknown>>();
  /** The served model's series (key: the model as JSON). */
  readonly #models = new Map<string, Map<string, SignalResult[]>>();

  private constructor(
    readonly data: MarketData,
    private readonly history: HistoryRepo | null,
  ) {
    this.asOf = data.asOf;
    this.regimeSeries = computeRegimeSeries({
      btc: data.candles.get('bitcoin') ?? [],
      fearGreed: data.fearGreed,
      funding: data.funding.get('bitcoin') ?? [],
    });
    const regimeByDate = (d: string) => regimeAt(this.regimeSeries, d)?.regime ?? 'neutral';
    for (const c of CHAINS) {
      const dates = (data.candles.get(c.asset) ?? []).map((x) => x.date);
      if (dates.at(-1) !== data.asOf) dates.push(data.asOf);
      const metrics: Record<string, { date: string; value: number }[]> = {};
      for (const [m, s] of Object.entries(data.chains.get(c.chain) ?? {})) metrics[m] = s.points;
      this.chainHealthSeries.set(c.chain, computeChainHealthSeries({ chain: c.chain, metrics, regimeByDate, dates }));
    }
    for (const [asset, series] of this.seriesFor(CURRENT_MODEL)) this.signalSeries.set(asset, series);
  }

  /**
   * The signal series of every asset with data under `model` (computed point-in-time, each
   * day from data up to that day). The served model's series is computed once and kept
   * (`signalSeries`); other models (the backtest's parameter sets) are computed on each call,
   * and the backtest keeps them only while it runs.
   */
  seriesFor(model: SignalModel): Map<string, SignalResult[]> {
    const key = JSON.stringify(model);
    const hit = this.#models.get(key);
    if (hit) return hit;
    const data = this.data;
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
            regime: this.regimeSeries,
            chainHealth: a.chain ? (this.chainHealthSeries.get(a.chain) ?? null) : null,
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
    if (model === CURRENT_MODEL) this.#models.set(key, out);
    return out;
  }

  /**
   * Loads the provider's data as of `asOf` (default: its newest day) and computes every
   * series. `history` may be null for computations that need no storage (benchmarks, tests).
   * @throws RangeError when `asOf` is before the data starts.
   */
  static async create(provider: MarketDataProvider, history: HistoryRepo | null, asOf?: string): Promise<MarketService> {
    return new MarketService(await provider.load(asOf), history);
  }

  #cached<T>(key: string, build: () => T): Cached<T> {
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

  #resolve(asked: string): AssetInfo {
    const a = resolveAsset(asked);
    if (!a) throw assetNotFound(asked);
    return a;
  }

  #entry(a: AssetInfo, includeFactors: boolean): SignalEntry | null {
    const series = this.signalSeries.get(a.asset);
    const candles = this.data.candles.get(a.asset);
    const last = series?.at(-1);
    if (!series || !candles || !last) return null;
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
        if (e) signals.push(e);
        else unavailable.push({ asset: a.asset, reason: `no price data on or before ${this.asOf}` });
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
      if (!e) throw new ServiceError('NOT_FOUND', `Asset '${asked}' has no data on or before ${this.asOf}`);
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
        conditions: r.conditions,
        signals: this.signals(false).value.signals,
      };
    });
  }

  #health(chain: ChainId): ChainHealthData {
    const c = CHAINS.find((x) => x.chain === chain)!;
    const { date: _computedFor, ...h } = this.chainHealthSeries.get(chain)!.at(-1)!;
    return { ...h, name: c.name };
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
      for (const [m, v] of Object.entries(computed)) {
        metrics[m] = {
          value: v.value,
          change_7d: v.change_7d,
          change_7d_pct: v.change_7d_pct === null ? null : round(v.change_7d_pct, 4),
          as_of: v.as_of,
          source: series[m]?.source ?? 'dataset',
        };
      }
      return { chain: c.chain, name: c.name, as_of: this.asOf, metrics };
    });
  }

  /** Supported assets with their current signal and capability flags (GET /assets). */
  assets(): Cached<AssetsData> {
    return this.#cached('assets', () => ({
      assets: this.data.assets.map((a) => {
        const e = this.#entry(a, false);
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
            signal_history: e !== null,
            chain_health: a.chain !== null,
            chain_metrics: a.chain !== null,
            funding_rate: this.data.funding.has(a.asset),
            thesis: e !== null,
          },
        };
      }),
    }));
  }

  /**
   * The published track record (GET /track-record): the walk-forward backtest and the live
   * period of the served model. Computed on first use (a few seconds: three whole-history
   * series per parameter set) and then served from the memo.
   */
  trackRecord(): Cached<TrackRecordData> {
    return this.#cached('track-record', () => trackRecord(this));
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
   * Stored signal changes of one asset in the `days` days ending at the as-of day, newest
   * first, at most `limit` (GET /signal-history/{asset}).
   * @throws ServiceError NOT_FOUND for an unknown asset.
   */
  async signalHistory(asked: string, days: number, limit: number): Promise<Cached<HistoryData>> {
    const a = this.#resolve(asked);
    if (!this.history) throw new ServiceError('SERVICE_UNAVAILABLE', 'Signal history storage is not available');
    const entries = await this.history.listChanges(a.asset, addDays(this.asOf, -(days - 1)), this.asOf, limit, CURRENT_MODEL.version);
    return fresh<HistoryData>({ asset: a.asset, days, limit, model_version: CURRENT_MODEL.version, entries });
  }
}
