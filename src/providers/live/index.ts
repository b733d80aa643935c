/**
 * The live sources: {@link createLiveSources} builds one {@link LiveSource} per upstream
 * series the engine uses, sharing one HTTP client (so the per-host budget covers every series
 * on a host). {@link DOCUMENTED_GAPS} lists the series the engine uses that have no free
 * source. docs/live-data.md describes each source.
 */
import { alternativeMeFearGreed } from './alternative-me.ts';
import { binanceCandles, binanceFunding } from './binance.ts';
import type { AdapterContext } from './days.ts';
import { defillamaChainTvl, defillamaDailyFees, defillamaProtocolTvl } from './defillama.ts';
import { growthepieMetric } from './growthepie.ts';
import { DEFAULT_MAX_BODY_BYTES, HttpClient } from './http.ts';
import { hyperliquidCandles, hyperliquidFunding, hyperliquidStat } from './hyperliquid.ts';
import { solanaTransactions } from './solana.ts';
import { DEFAULT_BASE_URLS, UPSTREAM_NAMES, type LiveSource, type LiveSourceOptions, type UpstreamName } from './source.ts';

export * from './source.ts';
export * from './gaps.ts';

/** The 10 assets with Binance spot USDT pairs: asset id → [Binance symbol, OKX instrument]. */
export const SPOT_PAIRS: Record<string, [string, string]> = {
  bitcoin: ['BTCUSDT', 'BTC-USDT'],
  ethereum: ['ETHUSDT', 'ETH-USDT'],
  ripple: ['XRPUSDT', 'XRP-USDT'],
  binancecoin: ['BNBUSDT', 'BNB-USDT'],
  solana: ['SOLUSDT', 'SOL-USDT'],
  dogecoin: ['DOGEUSDT', 'DOGE-USDT'],
  cardano: ['ADAUSDT', 'ADA-USDT'],
  chainlink: ['LINKUSDT', 'LINK-USDT'],
  'avalanche-2': ['AVAXUSDT', 'AVAX-USDT'],
  litecoin: ['LTCUSDT', 'LTC-USDT'],
};

/** Binance USD-M perpetuals whose funding the engine uses (the assets with bundled funding). */
export const FUNDING_SYMBOLS: Record<string, string> = { bitcoin: 'BTCUSDT', ethereum: 'ETHUSDT', solana: 'SOLUSDT' };

/** Resolves the options into an adapter context (defaults documented on {@link LiveSourceOptions}). */
export function adapterContext(options: LiveSourceOptions = {}): AdapterContext {
  const baseUrls = { ...DEFAULT_BASE_URLS };
  for (const name of UPSTREAM_NAMES) {
    const u = options.baseUrls?.[name];
    if (u !== undefined) baseUrls[name] = u.replace(/\/+$/, '');
  }
  for (const [name, u] of Object.entries(baseUrls) as [UpstreamName, string][]) {
    const parsed = URL.canParse(u) ? new URL(u) : null;
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
      throw new RangeError(`base URL of ${name} is not an http(s) URL: '${u}'`);
  }
  const http = new HttpClient({
    fetch: options.fetch ?? globalThis.fetch,
    timeoutMs: options.timeoutMs ?? 15_000,
    retries: options.retries ?? 3,
    hostBudgetPerMinute: options.hostBudgetPerMinute ?? 60,
    retryMinTimeoutMs: options.retryMinTimeoutMs ?? 1000,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
  });
  return { http, baseUrls };
}

/**
 * Every live series: candles of the 11 assets (10 Binance spot with the OKX fallback, HYPE from
 * Hyperliquid), Fear & Greed, funding of bitcoin/ethereum/solana (Binance USD-M) and
 * hyperliquid (Hyperliquid), and the chain metrics named as in CHAIN_HEALTH_METRICS except the
 * {@link DOCUMENTED_GAPS}. All share one HTTP client; the Solana source keeps its samples in
 * memory, so call this once per process.
 * @throws RangeError when a base URL is not an http(s) URL.
 */
export function createLiveSources(options: LiveSourceOptions = {}): LiveSource[] {
  const ctx = adapterContext(options);
  return [
    ...Object.entries(SPOT_PAIRS).map(([asset, [symbol, inst]]) => binanceCandles(ctx, asset, symbol, inst)),
    hyperliquidCandles(ctx, 'hyperliquid', 'HYPE'),
    alternativeMeFearGreed(ctx),
    ...Object.entries(FUNDING_SYMBOLS).map(([asset, symbol]) => binanceFunding(ctx, asset, symbol)),
    hyperliquidFunding(ctx, 'hyperliquid', 'HYPE'),
    defillamaChainTvl(ctx, 'eth', 'tvl', 'Ethereum'),
    defillamaChainTvl(ctx, 'sol', 'tvl', 'Solana'),
    growthepieMetric(ctx, 'eth', 'active_addresses', 'ethereum', 'daa', 'daily active addresses'),
    growthepieMetric(ctx, 'eth', 'transactions', 'ethereum', 'txcount', 'daily transactions'),
    solanaTransactions(ctx, 'sol', 'transactions'),
    defillamaProtocolTvl(ctx, 'hype', 'tvl_protocol_defillama', 'hyperliquid'),
    defillamaDailyFees(ctx, 'hype', 'fees', 'hyperliquid'),
    hyperliquidStat(ctx, 'hype', 'dex_volume', 'daily_usd_volume', 'daily_usd_volume', 'USD, perp-dominated'),
    hyperliquidStat(ctx, 'hype', 'active_addresses', 'daily_unique_users', 'daily_unique_users', 'daily unique users'),
    hyperliquidStat(ctx, 'hype', 'net_inflow_usd', 'daily_inflow', 'inflow', 'net USDC bridge inflow, USD'),
  ];
}
