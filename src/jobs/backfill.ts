import { CURRENT_MODEL } from '../engine/signal.ts';
import type { MarketService } from '../services/market.ts';
import type { LevelRule } from '../engine/types.ts';
import type { ChangeWithoutRule, HistoryRepo } from '../store/history-repo.ts';

/**
 * Version of the served signal model (CURRENT_MODEL.version in src/engine/signal.ts). Stored
 * with each history row and each backfill: a new version computes its own history beside the
 * old one's rows; bump it when the engine's output for a past day would change.
 */
export const ENGINE_VERSION = CURRENT_MODEL.version;

/**
 * Per asset: rows inserted (0 when skipped), whether a previous run already covered it, and
 * of its stored changes without a `level_rule` (rows stored before migration 0008) how many
 * this run filled and how many it left null (see {@link runBackfill}).
 */
export interface BackfillResult {
  asset: string;
  inserted: number;
  skipped: boolean;
  level_rule_filled: number;
  level_rule_left_null: number;
}

/**
 * The signal-history backfill job: stores every asset's signal changes, computed point-in-time
 * (each from data up to its own day), through the as-of day, unless a previous run already
 * covered it with the same engine version; then saves the served snapshot of the as-of day.
 * Idempotent: history is never rewritten (docs/methodology.md, "Signal history").
 *
 * One addition is made to stored rows: a change of the served model stored without its
 * `level_rule` (by a version from before migration 0008) gets the rule of the change recomputed
 * for the same day, if that change has the same signal, previous signal and score as the
 * stored one; nothing else of the row is changed, and a row that does not match stays null
 * (`level_rule_left_null`; looked at again by the next run, in one query, with the same result
 * unless the inputs of that day changed). A row that has a rule is never touched.
 * @throws when the database fails (each asset's rows are written in one transaction, so a
 *   failure leaves no half-written asset).
 */
export async function runBackfill(market: MarketService, history: HistoryRepo): Promise<BackfillResult[]> {
  const out: BackfillResult[] = [];
  const states = await history.backfillStates();
  const withoutRule = await history.changesWithoutRule(ENGINE_VERSION);
  for (const a of market.data.assets) {
    const through = market.data.candles.get(a.asset)?.at(-1)?.date;
    if (!through) continue;
    const fill = await fillLevelRules(market, history, a.asset, withoutRule.get(a.asset) ?? []);
    const state = states.get(a.asset) ?? null;
    if (state && state.engineVersion === ENGINE_VERSION && state.throughDate >= through) {
      out.push({ asset: a.asset, inserted: 0, skipped: true, ...fill });
      continue;
    }
    // After the first run only the days after the stored ones are appended: a past day is never
    // restated, even when inputs that arrived late (chain metrics, a refetched source) would now
    // compute it differently (docs/live-data.md, "Ingest").
    const all = market.changes(a.asset);
    const changes = state && state.engineVersion === ENGINE_VERSION ? all.filter((c) => c.changed_at > state.throughDate) : all;
    const inserted = await history.storeChanges(a.asset, changes, through, ENGINE_VERSION);
    out.push({ asset: a.asset, inserted, skipped: false, ...fill });
  }
  await history.saveSnapshots(
    market.asOf,
    market.signals(true).value.signals.map((s) => ({
      asset: s.asset,
      signal: s.signal,
      score: s.score,
      confidence: s.confidence,
      price_usd: s.price_usd,
      payload: s,
    })),
  );
  return out;
}

/**
 * Fills the null `level_rule` of one asset's stored changes `rows` from the changes recomputed
 * now: a row gets the recomputed change's rule when a change is recomputed for its day with the
 * same signal, previous signal and score; other rows stay null.
 * @returns how many rows were filled and how many stay null.
 */
async function fillLevelRules(
  market: MarketService,
  history: HistoryRepo,
  asset: string,
  rows: ChangeWithoutRule[],
): Promise<{ level_rule_filled: number; level_rule_left_null: number }> {
  if (rows.length === 0) return { level_rule_filled: 0, level_rule_left_null: 0 };
  const byDay = new Map(market.changes(asset).map((c) => [c.changed_at, c]));
  const fills: { id: number; level_rule: LevelRule }[] = [];
  for (const r of rows) {
    const c = byDay.get(r.changed_at);
    if (c && c.signal === r.signal && c.previous_signal === r.previous_signal && c.score === r.score && c.level_rule)
      fills.push({ id: r.id, level_rule: c.level_rule });
  }
  const filled = await history.fillLevelRules(fills);
  return { level_rule_filled: filled, level_rule_left_null: rows.length - filled };
}
