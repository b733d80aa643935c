import { z } from 'zod';
import { AssetArg, getSignal, listSignals } from '../../services/operations/market.ts';
import { SignalEntrySchema, SignalsDataSchema, type SignalEntry, type SignalsData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { signalLine } from './format.ts';

/**
 * Output of get_signals: the REST `data` of GET /signals (`signals`, `unavailable`) when no
 * asset is given, or of GET /signals/{asset} (one signal entry) when one is. MCP needs a single
 * object schema, so both shapes' fields are listed as optional.
 */
export const GetSignalsOutput = SignalsDataSchema.partial().extend(SignalEntrySchema.partial().shape);

/** get_signals: listSignals, or getSignal with `asset`. */
export const getSignalsTool = defineTool({
  name: 'get_signals',
  title: 'Trading signals',
  description:
    'Current trading signal (strong_buy, buy, neutral, sell, strong_sell) with composite score (-1..1), confidence, price and 24h/7d change, for one asset or for all supported assets. Set include_factors to get the explained breakdown (trend, momentum, RSI, Fear & Greed, funding rate, chain health, regime), whose contributions sum to the score. Same data as GET /api/v1/signals and /signals/{asset}.',
  input: z.object({
    asset: AssetArg.optional().describe('One asset id or ticker; omit for all assets'),
    include_factors: z.boolean().default(false).describe('Add the factor breakdown'),
  }),
  output: GetSignalsOutput,
  route: (a) =>
    a.asset === undefined
      ? { op: listSignals, input: { include_factors: a.include_factors } }
      : { op: getSignal, input: { asset: a.asset, include_factors: a.include_factors } },
  summary(d: SignalsData | SignalEntry): string {
    if ('signals' in d && Array.isArray(d.signals)) {
      const s = d as SignalsData;
      const asOf = s.signals[0]?.as_of ?? 'n/a';
      return [`Signals of ${s.signals.length} assets as of ${asOf}:`, ...s.signals.map((e) => `- ${signalLine(e)}`)].join('\n');
    }
    const e = d as SignalEntry;
    const factors = e.factors
      ? `\nFactors: ${e.factors.map((f) => `${f.name} ${f.contribution >= 0 ? '+' : ''}${f.contribution.toFixed(3)}`).join(', ')}`
      : '';
    return `${e.name}: ${signalLine(e)}; since ${e.since}, as of ${e.as_of}.${factors}`;
  },
});
