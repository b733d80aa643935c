import { z } from 'zod';
import { CURRENT_MODEL, FACTOR_ORDER } from '../../engine/signal.ts';
import { AssetArg, getSignal, listSignals } from '../../services/operations/market.ts';
import { SignalEntrySchema, SignalsDataSchema, type SignalEntry, type SignalsData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { count, signalLine } from './format.ts';

/**
 * Output of get_signals: the REST `data` of GET /signals (`signals`, `unavailable`) when no
 * asset is given, or of GET /signals/{asset} (one signal entry) when one is. MCP needs a single
 * object schema, so both shapes' fields are listed as optional.
 */
export const GetSignalsOutput = SignalsDataSchema.partial().extend(SignalEntrySchema.partial().shape);

/** Readable names of the factors, for the tool description. */
const FACTOR_LABELS: Record<(typeof FACTOR_ORDER)[number], string> = {
  trend: 'trend',
  momentum: 'momentum',
  rsi: 'RSI',
  fear_greed: 'Fear & Greed',
  funding_rate: 'funding rate',
  chain_health: 'chain health',
  regime: 'regime',
};

/** The factors the served model weighs (weight > 0), in the order they are listed: an agent is not promised a factor it will not get. */
const SERVED_FACTORS = FACTOR_ORDER.filter((f) => CURRENT_MODEL.weights[f] > 0)
  .map((f) => FACTOR_LABELS[f])
  .join(', ');

/** get_signals: listSignals, or getSignal with `asset`. */
export const getSignalsTool = defineTool({
  name: 'get_signals',
  title: 'Trading signals',
  description: `Current trading signal (strong_buy, buy, neutral, sell, strong_sell) of model ${CURRENT_MODEL.version} with composite score (-1..1), confidence (0..1), price in USD and 24h/7d change in %, for one asset or for all supported assets. Set include_factors to get the explained breakdown (${SERVED_FACTORS}), whose contributions sum to the score. Same data as GET /api/v1/signals and /signals/{asset}.`,
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
      return [
        `Signals of ${count(s.signals.length, 'asset')} as of ${asOf}:`,
        ...s.signals.map((e) => `- ${signalLine(e)}`),
        ...(s.unavailable.length ? [`Not served as current: ${s.unavailable.map((u) => `${u.asset} (${u.reason})`).join('; ')}`] : []),
      ].join('\n');
    }
    const e = d as SignalEntry;
    const factors = e.factors
      ? `\nFactors: ${e.factors.map((f) => `${f.name} ${f.contribution >= 0 ? '+' : ''}${f.contribution.toFixed(3)}`).join(', ')}`
      : '';
    const missing = e.missing_factors?.length
      ? `\nWithout data (not invented): ${e.missing_factors.map((m) => `${m.name} (${m.reason})`).join('; ')}`
      : '';
    return `${e.name}: ${signalLine(e)}; since ${e.since}, as of ${e.as_of}. ${e.level_rule.explanation}${factors}${missing}`;
  },
});
