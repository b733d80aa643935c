import { z } from 'zod';
import { Day } from './common.ts';

/**
 * Zod schema of GET /api/v1/track-record (REST only; no MCP tool): the walk-forward backtest
 * of the served signal model and its live period (src/services/backtest.ts; definitions in
 * docs/methodology.md, "Evaluation"). Returns and rates are fractions (0.05 = 5 %).
 */

const Performance = {
  total_return: z.number().describe('Compounded return over the window, fraction'),
  sharpe: z.number().nullable().describe('Annualised Sharpe: mean / sd of daily returns x sqrt(365); null when undefined (never exposed)'),
  max_drawdown: z.number().max(0).describe('Largest fall of the equity curve from its running peak, fraction <= 0'),
};
const Strategy = z.object({
  ...Performance,
  exposure: z.number().min(0).max(1).describe('Share of days with a position'),
  trades: z.number().int().describe('Position changes (each costs cost_bps per unit)'),
});
const Bands = z
  .object({ buy: z.number(), strong: z.number() })
  .describe('|score| above which the level is buy/sell and strong_buy/strong_sell');

/** Metrics of one asset or the pool over a window. */
export const WindowMetricsSchema = z.object({
  from: Day.describe('First day of the window; for an asset whose data starts later (HYPE), its first day of data'),
  to: Day,
  days: z.number().int().describe('Decision days (days earning a next-day return)'),
  gaps: z
    .number()
    .int()
    .describe(
      'Days without a next-day candle while later candles exist (holes in the data; they earn nothing); the last day of the data is not one',
    ),
  cost_bps: z.number(),
  buy_and_hold: z.object(Performance),
  long_flat: Strategy.describe('Long on buy and strong_buy, flat otherwise'),
  long_short: Strategy.describe('Long on buy and strong_buy, short on sell and strong_sell'),
  median_run_days: z.number().nullable().describe('Median length of a run of one level, days'),
  level_changes: z.number().int(),
  reversed_within_3d: z.number().nullable().describe('Share of level changes undone (previous level back) within 3 days'),
  hit_rates: z.object({
    days_30d: z.number().int(),
    p_up_30d: z.number().nullable().describe('Base rate of 30-day rises'),
    buy_edge_30d: z.number().nullable().describe('P(up 30 d | buy or strong_buy) - P(up 30 d)'),
    sell_edge_30d: z.number().nullable().describe('P(down 30 d | sell or strong_sell) - P(down 30 d)'),
    buy_days: z.number().int(),
    sell_days: z.number().int(),
  }),
  ic_7d: z.number().nullable().describe('Spearman correlation of the daily score with the next 7-day return'),
  ic_30d: z.number().nullable().describe('Spearman correlation of the daily score with the next 30-day return'),
  levels: z
    .object({ strong_buy: z.number(), buy: z.number(), neutral: z.number(), sell: z.number(), strong_sell: z.number() })
    .describe('Share of asset-days per level'),
  confidence: z
    .array(z.object({ from: z.number(), to: z.number(), days: z.number().int(), hit_rate: z.number().nullable() }))
    .describe('Hit rate of buy/sell days (30-day return in the level direction) per confidence band'),
});

/** Metrics of one asset over a window, with its id and ticker. */
export const AssetWindowMetricsSchema = WindowMetricsSchema.extend({ asset: z.string(), symbol: z.string() });

/** A backtest report (the JSON of `npm run cli -- backtest --json`). */
export const BacktestReportSchema = z.object({
  model_version: z.string(),
  mode: z.enum(['fixed', 'walk_forward']),
  from: Day,
  to: Day,
  cost_bps: z.number(),
  bands: Bands.nullable().describe('Bands of a fixed-parameter run; null in walk-forward mode (see choices)'),
  choices: z
    .array(
      z.object({
        year: z.number().int(),
        trained_through: Day.describe('Last decision day of the data the choice was made on'),
        bands: Bands,
        candidates: z.array(
          z.object({ bands: Bands, objective: z.number().nullable().describe('Pooled long/short Sharpe on the training data') }),
        ),
      }),
    )
    .describe('Walk-forward: the parameters chosen for each scored year'),
  pooled: WindowMetricsSchema,
  assets: z.array(AssetWindowMetricsSchema),
});

/** `data` of GET /track-record. */
export const TrackRecordSchema = z.object({
  model_version: z.string().describe('The served signal model'),
  walk_forward: BacktestReportSchema.describe(
    'Walk-forward from 2020-01-01 through the as-of day, 10 bps per position change: the level bands are chosen each year on earlier data only (out of sample); the model\'s structure was chosen with these years in view (docs/methodology.md, "Honesty"), so these figures are in-sample for it',
  ),
  by_year: z
    .array(
      z.object({
        year: z.number().int(),
        pooled: WindowMetricsSchema.describe(
          'The walk-forward run over this calendar year alone (cut to the window), pooled over the assets',
        ),
        long_flat_sharpe_wins: z
          .object({ assets: z.number().int(), of: z.number().int() })
          .describe("On how many of the assets with data that year long/flat's Sharpe was at least buy-and-hold's"),
      }),
    )
    .describe(
      'Each year of the walk-forward window scored on its own: how much of the whole-window result one year carries (the pooled 30-day IC can be positive over the window while negative in most years)',
    ),
  live: z.object({
    from: Day.describe('First day after the data the model version was built on (2025-10-01): its out-of-sample period starts here'),
    to: Day.nullable().describe(
      "Last day of the period (the data's as-of day); null while the data ends before `from` (no day to score yet)",
    ),
    days: z.number().int().describe('Decision days scored (days earning a next-day return); 0 while the period has none'),
    report: BacktestReportSchema.nullable().describe(
      'The served model over that period, recomputed from the stored data with the served code and bands (not a log of the answers served at the time); null before it has any day',
    ),
    note: z.string().describe('What the period is, in a sentence'),
  }),
});

export type TrackRecordData = z.infer<typeof TrackRecordSchema>;
