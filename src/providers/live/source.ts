/**
 * The port of the live market-data adapters: one {@link LiveSource} per upstream series.
 * Every adapter returns complete UTC days only, already normalised to the engine's units
 * (src/engine/types.ts: USD prices, funding as a fraction per 8 hours, metric values in the
 * unit the metric's name gives). Sources, cadences and caveats: docs/live-data.md.
 */
import type { Candle, ChainId, FearGreedPoint, MetricPoint, SeriesKind } from '../../engine/types.ts';

/**
 * A daily funding-rate mean, normalised to the fraction per 8 hours the engine uses.
 * `date` is the UTC day (YYYY-MM-DD); `rate` the mean of that day's prints, each converted to
 * per-8-hours (`rate_per_interval × 8 / interval_hours`); `interval_hours` the venue's funding
 * interval (8 for Binance BTC/ETH/SOL, 1 for Hyperliquid); `prints` how many prints the day
 * had (a day with fewer than `24 / interval_hours` prints is still returned, and `prints` says so).
 */
export interface FundingDay {
  date: string;
  rate: number;
  interval_hours: number;
  prints: number;
}

/** What a series holds (the engine's series kinds). */
export type { SeriesKind };

/**
 * Points of one fetch, tagged by kind. `source` is the provenance of these points, naming the
 * venue actually used (e.g. the OKX fallback when Binance refused the region); it equals the
 * {@link LiveSource.source} of the series unless a fallback answered.
 */
export type SeriesPoints =
  | { kind: 'candles'; points: Candle[]; source: string }
  | { kind: 'fear_greed'; points: FearGreedPoint[]; source: string }
  | { kind: 'funding'; points: FundingDay[]; source: string }
  | { kind: 'metric'; points: MetricPoint[]; source: string };

/** The upstreams, each with an overridable base URL ({@link DEFAULT_BASE_URLS}). */
export const UPSTREAM_NAMES = [
  'binance',
  'binanceFutures',
  'okx',
  'hyperliquid',
  'alternativeMe',
  'defillama',
  'growthepie',
  'hyperliquidStats',
  'solanaRpc',
] as const;
/** One upstream (a base URL and its host's request budget). */
export type UpstreamName = (typeof UPSTREAM_NAMES)[number];

/**
 * Public, key-free base URLs (no trailing slash). `binance` is the market-data-only host
 * `data-api.binance.vision` (serves /api/v3/klines like api.binance.com); `hyperliquidStats`
 * is the stats feed behind stats.hyperliquid.xyz (paths `/Mainnet/<metric>`).
 */
export const DEFAULT_BASE_URLS: Record<UpstreamName, string> = {
  binance: 'https://data-api.binance.vision',
  binanceFutures: 'https://fapi.binance.com',
  okx: 'https://www.okx.com',
  hyperliquid: 'https://api.hyperliquid.xyz',
  alternativeMe: 'https://api.alternative.me',
  defillama: 'https://api.llama.fi',
  growthepie: 'https://api.growthepie.xyz',
  hyperliquidStats: 'https://stats-data.hyperliquid.xyz',
  solanaRpc: 'https://api.mainnet-beta.solana.com',
};

/** One upstream series. */
export interface LiveSource {
  /**
   * Stable id: 'candles:<asset id>' (e.g. candles:bitcoin, candles:avalanche-2), 'fear_greed',
   * 'funding:<asset id>', 'metric:<chain>:<metric>' (e.g. metric:eth:tvl).
   */
  readonly series: string;
  readonly kind: SeriesKind;
  /** Asset id (candles/funding); null for fear_greed and metrics. */
  readonly asset: string | null;
  /** Chain (metric series); null otherwise. */
  readonly chain: ChainId | null;
  /** Metric name exactly as the engine uses it (src/engine/chain-health.ts); null otherwise. */
  readonly metric: string | null;
  /** Upstream host name used for the per-host budget, e.g. 'data-api.binance.vision'. */
  readonly host: string;
  /** Provenance stored with the rows, e.g. 'Binance spot /api/v3/klines BTCUSDT 1d'. */
  readonly source: string;
  /** Expected cadence of new points, hours (24 for daily series). Used for staleness. */
  readonly cadenceHours: number;
  /** How often the ingest job should poll it (a cron pattern for croner, e.g. '5 0 * * *' or '*\/15 * * * *'). */
  readonly schedule: string;
  /**
   * Complete UTC days strictly after `after` (YYYY-MM-DD) and strictly before `today` (today's
   * partial day is never returned), ascending, deduplicated.
   * @throws UpstreamError (naming the source, the URL path and, for a format change, the
   *   field) — never returns a wrong number.
   */
  fetch(after: string, today: string, signal?: AbortSignal): Promise<SeriesPoints>;
}

/** Why an upstream call failed. */
export type UpstreamErrorKind = 'http' | 'timeout' | 'format' | 'network' | 'budget';

/**
 * A failed upstream call. `source` is the series' provenance label (or upstream name),
 * `kind` the failure class: 'http' (a non-2xx status after retries; `status` holds it),
 * 'timeout' (no complete answer within the per-request timeout, after retries), 'format'
 * (the body is not the documented shape; the message names the field path), 'network'
 * (connection refused/reset, body cut off; after retries) or 'budget' (the per-host request
 * budget did not free a slot in time, or the caller aborted while waiting).
 */
export class UpstreamError extends Error {
  override name = 'UpstreamError';
  /** The HTTP status of an 'http' failure. */
  readonly status: number | undefined;
  constructor(
    readonly source: string,
    message: string,
    readonly kind: UpstreamErrorKind,
    options?: ErrorOptions & { status?: number },
  ) {
    super(message, options);
    this.status = options?.status;
  }
}

/** Options of {@link createLiveSources} (all optional). */
export interface LiveSourceOptions {
  /**
   * Base URLs per upstream, overridable (tests, mirrors): binance, binanceFutures, okx (fallback
   * venue), hyperliquid, alternativeMe, defillama, growthepie, hyperliquidStats, solanaRpc.
   */
  baseUrls?: Partial<Record<UpstreamName, string>>;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof fetch;
  /** Timeout of one request attempt, ms (default 15000). */
  timeoutMs?: number;
  /** Retries after the first attempt on 429/5xx/network errors/timeouts (default 3). */
  retries?: number;
  /** Requests per minute per host (default 60). */
  hostBudgetPerMinute?: number;
  /** First backoff delay between retries, ms (default 1000; doubles per retry, at most 30 s). */
  retryMinTimeoutMs?: number;
  /** Longest Retry-After honoured, ms (default 60000); a longer one fails the call at once. */
  maxRetryAfterMs?: number;
  /** Largest response body read, bytes (default 64 MiB); a larger one is a format error, not retried. */
  maxBodyBytes?: number;
}
