import { z } from 'zod';
import { listAssets } from '../../services/operations/market.ts';
import { AssetsDataSchema, type AssetsData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { count } from './format.ts';

/** get_assets: listAssets (no per-asset stale flag: a stale or missing asset has a null signal; its summary says so). */
export const getAssetsTool = defineTool({
  name: 'get_assets',
  title: 'Supported assets',
  description:
    'The supported assets (CoinGecko ids and tickers) with their current signal, score and price, chain, the days their prices cover (data_from, data_to) and capability flags (signals, factors, signal_history, chain_health, chain_metrics, funding_rate, thesis). An asset has no stale flag here: one whose prices are missing or stale has no current signal (signal, score and price_usd null, capabilities.signals false), and data_to, its newest price day, says how old they are; get_signals lists such assets under unavailable with the reason. Call this to find valid asset ids. Same data as GET /api/v1/assets.',
  input: z.object({}),
  output: AssetsDataSchema,
  route: () => ({ op: listAssets, input: {} }),
  summary: (d: AssetsData) =>
    [
      `${count(d.assets.length, 'supported asset')}:`,
      ...d.assets.map(
        (a) =>
          `- ${a.asset} (${a.symbol}): ${a.signal ?? `no current signal (prices missing or stale; newest price day ${a.data_to ?? 'none'})`}${a.chain ? `, chain ${a.chain}` : ''}`,
      ),
    ].join('\n'),
});
