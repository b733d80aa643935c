import type { ChainId } from '../engine/types.ts';

/**
 * A supported asset. `asset` is the canonical long-form id (CoinGecko's), `symbol` the
 * ticker, `chain` the chain whose health feeds the asset's signal (null for the others).
 */
export interface AssetInfo {
  asset: string;
  symbol: string;
  name: string;
  chain: ChainId | null;
}

/** The 11 assets the bundled dataset covers, in market-cap order of the dataset's end. */
export const ASSETS: readonly AssetInfo[] = [
  { asset: 'bitcoin', symbol: 'BTC', name: 'Bitcoin', chain: null },
  { asset: 'ethereum', symbol: 'ETH', name: 'Ethereum', chain: 'eth' },
  { asset: 'ripple', symbol: 'XRP', name: 'XRP', chain: null },
  { asset: 'binancecoin', symbol: 'BNB', name: 'BNB', chain: null },
  { asset: 'solana', symbol: 'SOL', name: 'Solana', chain: 'sol' },
  { asset: 'dogecoin', symbol: 'DOGE', name: 'Dogecoin', chain: null },
  { asset: 'cardano', symbol: 'ADA', name: 'Cardano', chain: null },
  { asset: 'hyperliquid', symbol: 'HYPE', name: 'Hyperliquid', chain: 'hype' },
  { asset: 'chainlink', symbol: 'LINK', name: 'Chainlink', chain: null },
  { asset: 'avalanche-2', symbol: 'AVAX', name: 'Avalanche', chain: null },
  { asset: 'litecoin', symbol: 'LTC', name: 'Litecoin', chain: null },
];

/** The chains with health scores and metrics, with the asset each belongs to. */
export const CHAINS: readonly { chain: ChainId; name: string; asset: string }[] = [
  { chain: 'eth', name: 'Ethereum', asset: 'ethereum' },
  { chain: 'sol', name: 'Solana', asset: 'solana' },
  { chain: 'hype', name: 'Hyperliquid', asset: 'hyperliquid' },
];

const byKey = new Map<string, AssetInfo>();
for (const a of ASSETS) {
  byKey.set(a.asset, a);
  byKey.set(a.symbol.toLowerCase(), a);
}

/**
 * Resolves an asset id or ticker, case-insensitively (`BTC`, `bitcoin`, `Avalanche-2`).
 * @returns the asset, or undefined when unknown.
 */
export function resolveAsset(idOrSymbol: string): AssetInfo | undefined {
  return byKey.get(idOrSymbol.trim().toLowerCase());
}

/**
 * Resolves a chain id (`eth`, `sol`, `hype`), case-insensitively; the long asset id
 * (`ethereum`) and the ticker are accepted as aliases.
 */
export function resolveChain(id: string): (typeof CHAINS)[number] | undefined {
  const k = id.trim().toLowerCase();
  return CHAINS.find((c) => c.chain === k || c.asset === k || resolveAsset(k)?.asset === c.asset);
}
