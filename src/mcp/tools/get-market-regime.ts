import { z } from 'zod';
import { getRegime } from '../../services/operations/market.ts';
import { RegimeDataSchema, type RegimeData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { pct, staleNote } from './format.ts';

/** get_market_regime: getRegime. */
export const getMarketRegimeTool = defineTool({
  name: 'get_market_regime',
  title: 'BTC market regime',
  description:
    'The BTC market regime (bull, bear or neutral, with hysteresis) and the conditions behind it: RSI-14, Fear & Greed index, momentum (30-day return, price vs SMA-200) and funding rate, plus the signals of all assets. Same data as GET /api/v1/regime.',
  input: z.object({}),
  output: RegimeDataSchema,
  route: () => ({ op: getRegime, input: {} }),
  summary(d: RegimeData): string {
    const c = d.conditions;
    return `BTC regime ${d.regime} (score ${d.score.toFixed(2)}, confidence ${d.confidence.toFixed(2)}) since ${d.since}, as of ${d.as_of}. RSI-14 ${c.rsi?.value ?? 'n/a'}, Fear & Greed ${c.fear_greed ? `${c.fear_greed.value} (${c.fear_greed.classification})` : 'n/a'}, 30d return ${pct(c.momentum?.return_30d_pct)}, funding rate ${c.funding_rate ? `${c.funding_rate.value} per 8 h (${c.funding_rate.state})` : 'n/a'}.${staleNote(d)}`;
  },
});
