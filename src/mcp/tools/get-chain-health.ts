import { z } from 'zod';
import { CHAIN_HEALTH_METRICS } from '../../engine/chain-health.ts';
import { ChainArg, getChainHealth, listChainHealth } from '../../services/operations/market.ts';
import { ChainHealthListSchema, ChainHealthSchema, type ChainHealthData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { count, staleNote } from './format.ts';

/** Output of get_chain_health: GET /chain-health's `{chains}` without `chain`, else one entry. */
export const GetChainHealthOutput = ChainHealthListSchema.partial().extend(ChainHealthSchema.partial().shape);

function line(h: ChainHealthData): string {
  const used = `${h.components.length} of ${count(h.components.length + h.missing_metrics.length, 'metric')}`;
  const missing = h.missing_metrics.length ? `; missing: ${h.missing_metrics.map((m) => `${m.metric} (${m.reason})`).join('; ')}` : '';
  return `${h.name} (${h.chain}): ${h.status}, score ${h.score ?? 'n/a'}, z-score ${h.z_score ?? 'n/a'}, regime ${h.regime} (sensitivity ${h.sensitivity}), as of ${h.as_of ?? 'n/a'}, from ${used}${missing}.${staleNote(h)}`;
}

/** The metrics each chain is scored on (engine CHAIN_HEALTH_METRICS), for the description. */
const METRICS = Object.entries(CHAIN_HEALTH_METRICS)
  .map(([chain, ms]) => `${chain}: ${ms.map((m) => m.metric).join(', ')}`)
  .join('; ');

/** get_chain_health: listChainHealth, or getChainHealth with `chain`. */
export const getChainHealthTool = defineTool({
  name: 'get_chain_health',
  title: 'On-chain health',
  description: `Fundamental on-chain health score (0..100, 50 = normal) of Ethereum (eth), Solana (sol) and Hyperliquid (hype): z-scores of the chain's metrics (${METRICS}) against their trailing distribution, with regime-adjusted sensitivity; the answer lists the metrics used and the missing ones. Omit chain for all three. Same data as GET /api/v1/chain-health and /chain-health/{asset}.`,
  input: z.object({ chain: ChainArg.optional().describe('eth, sol or hype (asset ids and tickers accepted); omit for all') }),
  output: GetChainHealthOutput,
  route: (a) => (a.chain === undefined ? { op: listChainHealth, input: {} } : { op: getChainHealth, input: { chain: a.chain } }),
  summary: (d: { chains: ChainHealthData[] } | ChainHealthData) => ('chains' in d ? d.chains.map(line).join('\n') : line(d)),
});
