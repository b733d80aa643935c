import { getSignalHistory } from '../../services/operations/market.ts';
import { HistoryDataSchema, type HistoryData } from '../../services/schemas/market.ts';
import { defineTool } from '../tool.ts';
import { count, levelReason } from './format.ts';

/**
 * get_signal_history: getSignalHistory (API key of the pro or api tier); arguments = the
 * operation's input. Its summary lists each change with why it took its level (levelReason).
 */
export const getSignalHistoryTool = defineTool({
  name: 'get_signal_history',
  title: 'Signal history',
  description:
    "Past changes of an asset's signal, newest first, each with the factor snapshot computed point-in-time from the data of that day; end pages back to older windows (each answer's next_end is the next page's end, null at the start of the history). Needs a Pro or API tier key. Same data as GET /api/v1/signal-history/{asset}.",
  input: getSignalHistory.input,
  output: HistoryDataSchema,
  route: (a) => ({ op: getSignalHistory, input: a }),
  summary(d: HistoryData): string {
    const head = `${count(d.entries.length, 'signal change')} of ${d.asset} from ${d.from} to ${d.to} (${count(d.days, 'day')}, limit ${d.limit})`;
    return [
      head + (d.entries.length ? ':' : '. No change in this window.'),
      ...d.entries.map(
        (e) =>
          `- ${e.changed_at}: ${e.previous_signal ?? 'none'} -> ${e.signal} (score ${e.score.toFixed(2)}, $${e.price_usd}); why: ${levelReason(e.level_rule)}`,
      ),
      d.next_end ? `Older changes are stored: call again with end=${d.next_end}.` : 'No older change is stored.',
    ].join('\n');
  },
});
