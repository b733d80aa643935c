import { z } from 'zod';
import { listAssets } from '../../services/operations/market.ts';
import { AssetsDataSchema, type AssetsData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { count } from './format.ts';

/** get_assets: listAssets. */
export const getAssetsTool = defineTool({
  name: 'get_assets',
  title: 'Supported assets',
  description:
    'The supported assets (CoinGecko ids and tickers) with their current signal, price, chain and capability flags (signals, factors, signal_history, chain_health, chain_metrics, funding_rate, thesis). Call this to find valid asset ids. Same data as GET /api/v1/assets.',
  input: z.object({}),
  output: AssetsDataSchema,
  route: () => ({ op: listAssets, input: {} }),
  summary: (d: AssetsData) =>
    [
      `${count(d.assets.length, 'supported asset')}:`,
      ...d.assets.map((a) => `- ${a.asset} (${a.symbol}): ${a.signal ?? 'no signal'}${a.chain ? `, chain ${a.chain}` : ''}`),
    ].join('\n'),
});
