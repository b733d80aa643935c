import type { ToolDefinition } from '../tool.ts';
import { getAssetsTool } from './get-assets.ts';
import { getChainHealthTool } from './get-chain-health.ts';
import { getMarketRegimeTool } from './get-market-regime.ts';
import { getSignalHistoryTool } from './get-signal-history.ts';
import { getSignalsTool } from './get-signals.ts';
import { getThesisHealthTool } from './get-thesis-health.ts';

export { GetChainHealthOutput } from './get-chain-health.ts';
export { GetSignalsOutput } from './get-signals.ts';

/** Exactly the six read-only tools. */
export const TOOLS: readonly ToolDefinition[] = [
  getSignalsTool,
  getMarketRegimeTool,
  getChainHealthTool,
  getThesisHealthTool,
  getAssetsTool,
  getSignalHistoryTool,
] as never;
