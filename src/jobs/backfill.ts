import { CURRENT_MODEL } from '../engine/signal.ts';
import type { MarketService } from '../services/market.ts';
import type { HistoryRepo } from '../store/history-repo.ts';

/**
 * Version of the served signal model (CURRENT_MODEL.version in src/engine/signal.ts). Stored
 * with each history row and each backfill: a new version computes its own history beside the
 * old one's rows; bump it when the engine's output for a past day would change.
 */
export const ENGINE_VERSION = CURRENT_MODEL.version;

/** Per asset: rows inserted (0 when skipped) and whether a previous run already covered it. */
export interface BackfillResult {
  asset: string;
  inserted: number;
  skipped: boolean;
}

/**
 * The signal-history backfill job: stores every asset's signal changes, computed point-in-time
 * (each from data up to its own day), through the as-of day, unless a previous run already
 * covered it with the same engine version; then saves the served snapshot of the as-of day.
 * Idempotent: history is never rewritten (docs/methodology.md, "Signal history").
 * @throws when the database fails (each asset's rows are written in one transaction, so a
 *   failure leaves no half-written asset).
 */
export async function runBackfill(market: MarketService, history: HistoryRepo): Promise<BackfillResult[]> {
  const out: BackfillResult[] = [];
  const states = await history.backfillStates();
  for (const a of market.data.assets) {
    const through = market.data.candles.get(a.asset)?.at(-1)?.date;
    if (!through) continue;
    const state = states.get(a.asset) ?? null;
    if (state && state.engineVersion === ENGINE_VERSION && state.throughDate >= through) {
      out.push({ asset: a.asset, inserted: 0, skipped: true });
      continue;
    }
    // After the first run only the days after the stored ones are appended: a past day is never
    // restated, even when inputs that arrived late (chain metrics, a refetched source) would now
    // compute it differently (docs/live-data.md, "Ingest").
    const all = market.changes(a.asset);
    const changes = state && state.engineVersion === ENGINE_VERSION ? all.filter((c) => c.changed_at > state.throughDate) : all;
    const inserted = await history.storeChanges(a.asset, changes, through, ENGINE_VERSION);
    out.push({ asset: a.asset, inserted, skipped: false });
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
