import type { Candle, ChainId, FearGreedPoint, FundingPoint, MetricPoint, SeriesKind, SourcedPoints } from '../engine/types.ts';
import type { AssetInfo } from './assets.ts';

/** A series of one chain metric with where it came from. */
export interface MetricSeries {
  points: MetricPoint[];
  /** Provenance, e.g. `DefiLlama chain TVL via data/chains/ethereum.csv`. */
  source: string;
}

/**
 * Identity, provenance and freshness of one market series (docs/live-data.md, "Freshness").
 * `series` is `candles:<asset>`, `fear_greed`, `funding:<asset>` or `metric:<chain>:<metric>`;
 * `newest_date` the newest UTC day held (the store's provider with AS_OF: on or before it);
 * `last_success_at` / `last_error_at` ISO timestamps of the last successful and failed fetch
 * (null for data only imported from the bundled dataset).
 */
export interface SeriesFreshness {
  series: string;
  kind: SeriesKind;
  /** Asset id (candles, funding), chain id (metric) or null (Fear & Greed). */
  subject: string | null;
  metric: string | null;
  source: string;
  origin: 'bundled' | 'live';
  /** Expected cadence of new points, hours (24 for a daily series). */
  cadence_hours: number;
  newest_date: string | null;
  last_success_at: string | null;
  last_error: string | null;
  last_error_at: string | null;
}

/** One series of the bundled dataset with every point and its per-row provenance, for the import into the store. */
export type SeriesExport = Omit<SeriesFreshness, 'origin' | 'newest_date' | 'last_success_at' | 'last_error' | 'last_error_at'> & {
  rows: SourcedPoints;
};

/** A stretch of missing days in a daily series (both ends inclusive, UTC days). */
export interface DataGap {
  series: string;
  from: string;
  to: string;
  days: number;
}

/**
 * Everything the engine may see, already cut at `asOf`: no point dated after `asOf` is in
 * here, so every computation on it is point-in-time by construction.
 */
export interface MarketData {
  /** Newest UTC day visible (the service's "now"). */
  asOf: string;
  /** Newest UTC day in the provider's full data (>= asOf). */
  latestDate: string;
  assets: readonly AssetInfo[];
  candles: Map<string, Candle[]>;
  /** Provenance of each asset's candles (file and venues). */
  priceSources: Map<string, string>;
  fearGreed: FearGreedPoint[];
  fearGreedSource: string;
  /** Daily funding-rate means (fraction per 8 h) per asset; absent for assets without funding data. */
  funding: Map<string, FundingPoint[]>;
  fundingSources: Map<string, string>;
  /** Chain metric series per chain, keyed by metric name. */
  chains: Map<ChainId, Record<string, MetricSeries>>;
  /** Known gaps in the daily series (reported, never filled). */
  gaps: DataGap[];
  /** Every series with its provenance and freshness (newest day of the full data, not of the cut). */
  series: SeriesFreshness[];
}

/**
 * The provider port: where market data comes from. The bundled dataset is the first
 * implementation; live APIs (CoinGecko, Binance, Hyperliquid, alternative.me, DefiLlama)
 * would be others.
 */
export interface MarketDataProvider {
  readonly name: string;
  /**
   * Loads the data visible at `asOf` (YYYY-MM-DD, UTC; default: the newest date the
   * provider has).
   * @throws DataValidationError when the source data is malformed.
   * @throws RangeError when `asOf` is before the start of the data; a provider may also refuse
   *   a day after its newest (StoredMarketProvider: AsOfOutOfRangeError, a RangeError).
   */
  load(asOf?: string): Promise<MarketData>;
}

/** Raised when source data fails validation (non-increasing dates, non-finite numbers). */
export class DataValidationError extends Error {
  override name = 'DataValidationError';
}
