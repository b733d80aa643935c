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
 * the fill of its stored changes without a `level_rule` (rows stored before migration 0008):
 * whether this run looked for them (`level_rule_checked`; false when a previous run did for
 * this engine version), and of those found how many it filled and how many it left null (see
 * {@link runBackfill}).
 */
export interface BackfillResult {
  asset: string;
  inserted: number;
  skipped: boolean;
  level_rule_checked: boolean;
  level_rule_filled: number;
  level_rule_left_null: number;
}

/**
 * The signal-history backfill job: stores every asset's signal changes, computed point-in-time
 * (each from data up to its own day), through the as-of day, unless a previous run already
 * covered it with the same engine version; then saves the served snapshot of the as-of day.
 * Idempotent: history is never rewritten (docs/methodology.md, "Signal history").
 *
 * One addition is made to stored rows, once per asset and engine version: a change of the
 * served model stored without its `level_rule` (by a version from before migration 0008) gets
 * the rule of the change recomputed for the same day, if that change has the same signal,
 * previous signal and score as the stored one; nothing else of the row is changed, and a row
 * that does not match stays null (`level_rule_left_null`). The fills and the record that the
 * asset's fill is done for the engine version (`backfill_state.level_rule_version`, migration
 * 0009) are written in one transaction; a later run does not look for such rows again (no
 * query when every asset's fill is done), a new engine version does, once.
 * A row that has a rule is never touched.
 * @throws when the database fails (each asset's rows are written in one transaction, and its
 *   fills with their record in another, so a failure leaves no half-written asset).
 */
export async function runBackfill(market: MarketService, history: HistoryRepo): Promise<BackfillResult[]> {
  const out: BackfillResult[] = [];
  const states = await history.backfillStates();
  const served = market.data.assets.filter((a) => market.data.candles.get(a.asset)?.at(-1)?.date);
  // The query for rows without a rule runs only while an asset's fill is not done for this version.
  const toFill = new Set(served.filter((a) => states.get(a.asset)?.levelRuleVersion !== ENGINE_VERSION).map((a) => a.asset));
  const withoutRule = toFill.size > 0 ? await history.changesWithoutRule(ENGINE_VERSION) : new Map<string, ChangeWithoutRule[]>();
  for (const a of served) {
    const through = market.data.candles.get(a.asset)!.at(-1)!.date;
    const state = states.get(a.asset) ?? null;
    let inserted = 0;
    const skipped = !!state && state.engineVersion === ENGINE_VERSION && state.throughDate >= through;
    if (!skipped) {
      // After the first run only the days after the stored ones are appended: a past day is never
      // restated, even when inputs that arrived late (chain metrics, a refetched source) would now
      // compute it differently (docs/live-data.md, "Ingest").
      const all = market.changes(a.asset);
      const changes = state && state.engineVersion === ENGINE_VERSION ? all.filter((c) => c.changed_at > state.throughDate) : all;
      inserted = await history.storeChanges(a.asset, changes, through, ENGINE_VERSION);
    }
    // After storeChanges, so that the asset has a backfill state to record the fill in (the
    // rows it stores have their rule; the rows without one were read before).
    const fill = toFill.has(a.asset)
      ? { level_rule_checked: true, ...(await fillLevelRules(market, history, a.asset, withoutRule.get(a.asset) ?? [])) }
      : { level_rule_checked: false, level_rule_filled: 0, level_rule_left_null: 0 };
    out.push({ asset: a.asset, inserted, skipped, ...fill });
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
 * same signal, previous signal and score; other rows stay null. Records, in the same
 * transaction, that the asset's fill is done for ENGINE_VERSION (also when `rows` is empty).
 * @returns how many rows were filled and how many stay null.
 */
async function fillLevelRules(
  market: MarketService,
  history: HistoryRepo,
  asset: string,
  rows: ChangeWithoutRule[],
): Promise<{ level_rule_filled: number; level_rule_left_null: number }> {
  const fills: { id: number; level_rule: LevelRule }[] = [];
  if (rows.length > 0) {
    const byDay = new Map(market.changes(asset).map((c) => [c.changed_at, c]));
    for (const r of rows) {
      const c = byDay.get(r.changed_at);
      if (c && c.signal === r.signal && c.previous_signal === r.previous_signal && c.score === r.score && c.level_rule)
        fills.push({ id: r.id, level_rule: c.level_rule });
    }
  }
  const filled = await history.fillLevelRules(asset, ENGINE_VERSION, fills);
  return { level_rule_filled: filled, level_rule_left_null: rows.length - filled };
}
