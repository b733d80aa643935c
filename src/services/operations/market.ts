import { z } from 'zod';
import { HISTORY_TIERS } from '../../auth/tiers.ts';
import { apiKey, PUBLIC, PUBLIC_UNMETERED } from '../access.ts';
import { HISTORY_EPOCH } from '../market.ts';
import { defineOperation } from '../operation.ts';
import {
  AssetsDataSchema,
  ChainHealthListSchema,
  ChainHealthSchema,
  ChainMetricsSchema,
  HistoryDataSchema,
  PricesDataSchema,
  RegimeDataSchema,
  SignalEntrySchema,
  SignalsDataSchema,
  StatusDataSchema,
} from '../schemas/market.ts';
import { InputDay } from '../schemas/common.ts';
import { TrackRecordSchema } from '../schemas/track-record.ts';

/**
 * The market questions: signals, regime, chain health, chain metrics, assets, signal history.
 * All computed point-in-time from the data as of the service's as-of day (MarketService).
 */

/** An asset id (CoinGecko, e.g. `bitcoin`) or ticker (`BTC`), any case. */
export const AssetArg = z
  .string()
  .min(1)
  .max(64)
  .describe('Asset id (e.g. "bitcoin") or ticker ("BTC"), any case; see GET /assets or get_assets');
/** A chain: `eth`, `sol` or `hype` (their asset ids and tickers are accepted too). */
export const ChainArg = z.string().min(1).max(64).describe('Chain: eth, sol or hype (asset ids and tickers accepted)');
const IncludeFactorsArg = z.boolean().default(false).describe('Add the factor breakdown whose contributions sum to the score');
const None = z.object({});

export const listSignals = defineOperation({
  name: 'listSignals',
  tag: 'signals',
  summary: 'Signals of all assets',
  description:
    'Current five-level signal per asset (strong_buy, buy, neutral, sell, strong_sell) with score (-1..1), confidence (0..1), price and 24 h / 7 d changes; `include_factors=true` adds the factor breakdown whose contributions sum to the score. Assets without data at the as-of day are listed under `unavailable`.',
  policy: PUBLIC,
  input: z.object({ include_factors: IncludeFactorsArg }),
  output: SignalsDataSchema,
  run: (s, _caller, input) => s.market.signals(input.include_factors),
});

export const getSignal = defineOperation({
  name: 'getSignal',
  tag: 'signals',
  summary: 'Signal of one asset',
  description:
    'The signal of one asset with score, confidence, price, changes and `since`; `include_factors=true` adds the explained factor breakdown.',
  policy: PUBLIC,
  errors: ['NOT_FOUND'],
  input: z.object({ asset: AssetArg, include_factors: IncludeFactorsArg }),
  output: SignalEntrySchema,
  run: (s, _caller, input) => s.market.signal(input.asset, input.include_factors),
});

export const getRegime = defineOperation({
  name: 'getRegime',
  tag: 'regime',
  summary: 'BTC market regime',
  description:
    'bull / bear / neutral with hysteresis, the conditions behind it (RSI-14, Fear & Greed, momentum, funding rate) and the signals of all assets.',
  policy: PUBLIC,
  input: None,
  output: RegimeDataSchema,
  run: (s) => s.market.regime(),
});

export const listChainHealth = defineOperation({
  name: 'listChainHealth',
  tag: 'chains',
  summary: 'Health scores of eth, sol and hype',
  description:
    'Z-score normalized on-chain health (0..100, 50 = normal) with regime-adjusted sensitivity; stale or missing metrics are listed, not filled.',
  policy: PUBLIC,
  input: None,
  output: ChainHealthListSchema,
  run: (s) => s.market.chainHealth(),
});

export const getChainHealth = defineOperation({
  name: 'getChainHealth',
  tag: 'chains',
  summary: 'Health score of one chain',
  description: 'The health score of eth, sol or hype with its component z-scores and the metrics that are missing or stale.',
  policy: PUBLIC,
  errors: ['NOT_FOUND'],
  input: z.object({ chain: ChainArg }),
  output: ChainHealthSchema,
  run: (s, _caller, input) => s.market.chainHealthOf(input.chain),
});

export const getChainMetrics = defineOperation({
  name: 'getChainMetrics',
  tag: 'chains',
  summary: 'Raw chain metrics with 7-day deltas',
  description:
    "Every metric of the chain with its newest value (and that value's own as_of), the change over 7 days and its source; a metric without data has `value: null`.",
  policy: PUBLIC,
  errors: ['NOT_FOUND'],
  input: z.object({ chain: ChainArg }),
  output: ChainMetricsSchema,
  run: (s, _caller, input) => s.market.chainMetrics(input.chain),
});

export const listAssets = defineOperation({
  name: 'listAssets',
  tag: 'assets',
  summary: 'Supported assets with signals and capability flags',
  description:
    'The supported assets (CoinGecko ids and tickers) with their current signal, price, chain, the dates their data covers, and what can be asked about each. An asset whose prices are missing or stale has no current signal: `signal`, `score` and `price_usd` are null and `capabilities.signals` is false (`data_to` is its newest price day; GET /signals lists it under `unavailable` with the reason).',
  policy: PUBLIC,
  input: None,
  output: AssetsDataSchema,
  run: (s) => s.market.assets(),
});

/** `end` of the signal history: the window's last day. */
export const HistoryEnd = InputDay.refine((d) => d >= HISTORY_EPOCH, {
  // Names the value, as the other refusals of `end` do ("2025-10-01 is after the as-of day ...").
  error: (iss) => `${String(iss.input)} is before ${HISTORY_EPOCH}: the stored history starts later; give a later day`,
}).describe('Last day of the window, YYYY-MM-DD (default: the as-of day; not after it); page back with next_end from the previous answer');

/**
 * An integer argument from `min` to `max`, every failure with the same message as REST's
 * query parameter (`must be an integer from 1 to 365`): zod's own for 1e308 or 30.5 quoted
 * the safe-integer bound or "expected int".
 */
function intFromTo(min: number, max: number) {
  const error = `must be an integer from ${min} to ${max}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

export const getSignalHistory = defineOperation({
  name: 'getSignalHistory',
  tag: 'signals',
  summary: 'Historical signal changes (Pro or API tier)',
  description:
    'Changes of the signal level, newest first, each with the factor snapshot computed point-in-time from data up to that day (the score and factors; the level bands are those of the served model, fixed on data through 2025-08-31, also for earlier days: docs/methodology.md), in the `days` days ending at `end` (default: the as-of day). To page back, ask again with `end` = `next_end` until it is null. Needs an API key of the pro or api tier.',
  policy: apiKey(HISTORY_TIERS),
  errors: ['NOT_FOUND'],
  input: z.object({
    asset: AssetArg,
    days: intFromTo(1, 365).default(30).describe('History period in days, ending at `end` (default: the as-of day) (1..365)'),
    limit: intFromTo(1, 200).default(50).describe('Maximum number of entries (1..200)'),
    end: HistoryEnd.optional(),
  }),
  output: HistoryDataSchema,
  run: (s, _caller, input) => s.market.signalHistory(input.asset, input.days, input.limit, input.end),
});

export const getStatus = defineOperation({
  name: 'getStatus',
  tag: 'status',
  summary: 'Freshness of every market series',
  description:
    'The mode (offline on the bundled dataset, or live), the as-of day, the day freshness is judged against, and per series (candles per asset, Fear & Greed, funding per asset, chain metrics): its source, newest day, last successful fetch, last error and whether it is stale. Free: it counts against no quota.',
  policy: PUBLIC_UNMETERED,
  input: None,
  output: StatusDataSchema,
  run: (s) => s.market.status(),
});

/** Longest price window, in days (the same bound as the signal history's `days`). */
export const MAX_PRICE_DAYS = 365;

export const getPrices = defineOperation({
  name: 'getPrices',
  tag: 'assets',
  summary: 'Daily price candles of one asset',
  description:
    'Daily OHLCV candles (USD) of the `days` days ending at the as-of day, oldest first, from the market data provider (days the source lacks are absent, never filled), with `as_of` and `source`; plus the signal level at the first candle and the level changes inside the window (dates and levels only: the chart markers; scores and factor snapshots are in the tier-gated signal history). REST only.',
  policy: PUBLIC,
  errors: ['NOT_FOUND'],
  input: z.object({
    asset: AssetArg,
    days: z
      .number()
      .int()
      .min(1)
      .max(MAX_PRICE_DAYS)
      .default(90)
      .describe(`Window in days, ending at the as-of day (1..${MAX_PRICE_DAYS})`),
  }),
  output: PricesDataSchema,
  run: (s, _caller, input) => s.market.prices(input.asset, input.days),
});

export const getTrackRecord = defineOperation({
  name: 'getTrackRecord',
  tag: 'signals',
  summary: 'Track record of the signal model',
  description:
    'How the signals did: the walk-forward backtest from 2020-01-01 (10 bps per position change) per asset and pooled, and the days after the data the model was built on (from 2025-10-01, recomputed). Only the level bands are chosen out of sample; the model structure was chosen with 2020-2025 in view (docs/track-record.md: what is out of sample, by year, limits). REST only.',
  policy: PUBLIC,
  input: None,
  output: TrackRecordSchema,
  run: (s) => s.market.trackRecord(),
});
