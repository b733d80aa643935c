import { and, desc, eq, gte, isNull, lte, sql } from 'drizzle-orm';
import type { Db } from './db.ts';
import { backfillState, signalHistory, signalSnapshots } from './schema.ts';
import type { SignalChange } from '../engine/signal.ts';
import type { Factor, LevelRule, SignalLevel } from '../engine/types.ts';

/**
 * One stored signal change (see `signal_history`): the engine's change, as computed that day;
 * `level_rule` is null on rows stored before the history kept it (migration 0008) that the
 * backfill could not fill (runBackfill).
 */
export type StoredChange = Omit<SignalChange, 'level_rule'> & { level_rule: LevelRule | null };
/** A stored change with the model version that computed it. */
export type VersionedChange = StoredChange & { model_version: string };

/**
 * Backfill progress of one asset (`backfill_state`): the history is stored through
 * `throughDate` by model `engineVersion`; `levelRuleVersion` is the model version for which
 * the null `level_rule` of its stored changes were filled (null until they were).
 */
export interface BackfillState {
  throughDate: string;
  engineVersion: string;
  levelRuleVersion: string | null;
}

/** A stored change whose `level_rule` is null: what the backfill compares with a recomputed change. */
export interface ChangeWithoutRule {
  id: number;
  asset: string;
  changed_at: string;
  signal: SignalLevel;
  previous_signal: SignalLevel | null;
  score: number;
}

/**
 * A level rule read back from jsonb, rebuilt with its keys (nested ones too) in the order the
 * engine builds them (`levelRule` in engine/signal.ts; the order GET /signals/{asset} serves):
 * jsonb keeps keys sorted by length, then bytes, so a stored rule otherwise comes back as
 * `{bands, reason, pending, ...}`. Values are taken as stored; no key is added or dropped
 * except that the nested objects get exactly the engine's keys.
 */
export function levelRuleInEngineOrder(r: LevelRule): LevelRule {
  const g = r.volatility_gate;
  const p = r.pending;
  return {
    score_level: r.score_level,
    reason: r.reason,
    bands: { buy: r.bands.buy, strong: r.bands.strong },
    volatility_gate: g
      ? { open: g.open, downside_ratio: g.downside_ratio, max: g.max, short_days: g.short_days, long_days: g.long_days }
      : null,
    pending: p ? { signal: p.signal, days: p.days, needed: p.needed } : null,
    explanation: r.explanation,
  };
}

/**
 * A factor read back from jsonb, rebuilt with its keys in the engine's order (`Factor` in
 * engine/types.ts; the order GET /signals/{asset}?include_factors=true serves), for the same
 * reason as {@link levelRuleInEngineOrder}. Values are taken as stored.
 */
export function factorInEngineOrder(f: Factor): Factor {
  return {
    name: f.name,
    value: f.value,
    unit: f.unit,
    score: f.score,
    weight: f.weight,
    contribution: f.contribution,
    explanation: f.explanation,
    source: f.source,
    as_of: f.as_of,
  };
}

/** Rows per INSERT statement during a backfill (keeps statements well under parameter limits). */
const BATCH = 500;

/**
 * Signal history and snapshot storage, the same on PGlite and PostgreSQL.
 */
export class HistoryRepo {
  constructor(private readonly db: Db) {}

  /**
   * The backfill state of every asset in one query (the start-up's check: one round trip
   * instead of one per asset), by asset.
   */
  async backfillStates(): Promise<Map<string, BackfillState>> {
    const rows = await this.db
      .select({
        asset: backfillState.asset,
        throughDate: backfillState.throughDate,
        engineVersion: backfillState.engineVersion,
        levelRuleVersion: backfillState.levelRuleVersion,
      })
      .from(backfillState);
    return new Map(
      rows.map((r) => [r.asset, { throughDate: r.throughDate, engineVersion: r.engineVersion, levelRuleVersion: r.levelRuleVersion }]),
    );
  }

  /**
   * The backfill state of an asset, or null when it was never backfilled.
   */
  async backfillState(asset: string): Promise<BackfillState | null> {
    const rows = await this.db
      .select({
        throughDate: backfillState.throughDate,
        engineVersion: backfillState.engineVersion,
        levelRuleVersion: backfillState.levelRuleVersion,
      })
      .from(backfillState)
      .where(eq(backfillState.asset, asset));
    return rows[0] ?? null;
  }

  /**
   * Stores the signal changes of one asset computed by model `engineVersion` through
   * `throughDate`, in one transaction: existing rows (same asset, model version and day) are
   * kept as they are (history is never rewritten),
   * so re-running is idempotent. Records `throughDate` so a restart can skip the work.
   * @returns the number of rows inserted.
   */
  async storeChanges(asset: string, changes: StoredChange[], throughDate: string, engineVersion: string): Promise<number> {
    return this.db.transaction(async (tx) => {
      let inserted = 0;
      for (let i = 0; i < changes.length; i += BATCH) {
        const rows = changes.slice(i, i + BATCH).map((c) => ({
          asset,
          changedAt: c.changed_at,
          signal: c.signal,
          previousSignal: c.previous_signal,
          score: c.score,
          confidence: c.confidence,
          priceUsd: c.price_usd,
          factors: c.factors,
          levelRule: c.level_rule,
          modelVersion: engineVersion,
        }));
        const res = await tx.insert(signalHistory).values(rows).onConflictDoNothing().returning({ id: signalHistory.id });
        inserted += res.length;
      }
      await tx
        .insert(backfillState)
        .values({ asset, throughDate, engineVersion })
        .onConflictDoUpdate({
          target: backfillState.asset,
          set: { throughDate, engineVersion, updatedAt: sql`now()` },
        });
      return inserted;
    });
  }

  /**
   * Signal changes of `asset` computed by model `modelVersion` with `from <= changed_at <= to`,
   * newest first, at most `limit`.
   */
  async listChanges(asset: string, from: string, to: string, limit: number, modelVersion: string): Promise<VersionedChange[]> {
    const rows = await this.db
      .select()
      .from(signalHistory)
      .where(
        and(
          eq(signalHistory.asset, asset),
          eq(signalHistory.modelVersion, modelVersion),
          gte(signalHistory.changedAt, from),
          lte(signalHistory.changedAt, to),
        ),
      )
      .orderBy(desc(signalHistory.changedAt))
      .limit(limit);
    return rows.map((r) => ({
      changed_at: r.changedAt,
      signal: r.signal,
      previous_signal: r.previousSignal,
      score: r.score,
      confidence: r.confidence,
      price_usd: r.priceUsd,
      factors: r.factors.map(factorInEngineOrder),
      level_rule: r.levelRule === null ? null : levelRuleInEngineOrder(r.levelRule),
      model_version: r.modelVersion,
    }));
  }

  /**
   * The stored changes computed by model `modelVersion` whose `level_rule` is null (rows stored
   * before migration 0008), every asset at once, oldest first per asset; an empty map when
   * there are none (one query: the start-up's check).
   */
  async changesWithoutRule(modelVersion: string): Promise<Map<string, ChangeWithoutRule[]>> {
    const rows = await this.db
      .select({
        id: signalHistory.id,
        asset: signalHistory.asset,
        changed_at: signalHistory.changedAt,
        signal: signalHistory.signal,
        previous_signal: signalHistory.previousSignal,
        score: signalHistory.score,
      })
      .from(signalHistory)
      .where(and(eq(signalHistory.modelVersion, modelVersion), isNull(signalHistory.levelRule)))
      .orderBy(signalHistory.asset, signalHistory.changedAt);
    const out = new Map<string, ChangeWithoutRule[]>();
    for (const r of rows) {
      const list = out.get(r.asset);
      if (list) list.push(r);
      else out.set(r.asset, [r]);
    }
    return out;
  }

  /**
   * Sets `level_rule` on stored changes of `asset` (by row id) where it is still null, in one
   * statement, and records in the asset's backfill state that the fill is done for model
   * `modelVersion` (`level_rule_version`), both in one transaction: a failure leaves neither.
   * A row that has a rule already is left as it is, and nothing else of a row is touched; an
   * asset without a backfill state gets no record (there is no row to hold it).
   * @returns the number of rows updated.
   */
  async fillLevelRules(asset: string, modelVersion: string, fills: { id: number; level_rule: LevelRule }[]): Promise<number> {
    return this.db.transaction(async (tx) => {
      await tx
        .update(backfillState)
        .set({ levelRuleVersion: modelVersion, updatedAt: sql`now()` })
        .where(eq(backfillState.asset, asset));
      let filled = 0;
      if (fills.length > 0) {
        const payload = JSON.stringify(fills.map((f) => ({ id: f.id, rule: f.level_rule })));
        const res = (await tx.execute(sql`
          UPDATE signal_history AS h SET level_rule = v.rule
          FROM jsonb_to_recordset(${payload}::jsonb) AS v(id bigint, rule jsonb)
          WHERE h.id = v.id AND h.asset = ${asset} AND h.level_rule IS NULL
          RETURNING h.id`)) as unknown as { rows: { id: number }[] };
        filled = res.rows.length;
      }
      return filled;
    });
  }

  /** Upserts the served snapshot of each asset for one as-of day. */
  async saveSnapshots(
    asOf: string,
    snaps: { asset: string; signal: SignalLevel; score: number; confidence: number; price_usd: number; payload: unknown }[],
  ): Promise<void> {
    if (snaps.length === 0) return;
    await this.db
      .insert(signalSnapshots)
      .values(
        snaps.map((s) => ({
          asset: s.asset,
          asOf,
          signal: s.signal,
          score: s.score,
          confidence: s.confidence,
          priceUsd: s.price_usd,
          payload: s.payload,
        })),
      )
      .onConflictDoUpdate({
        target: [signalSnapshots.asset, signalSnapshots.asOf],
        set: {
          signal: sql`excluded.signal`,
          score: sql`excluded.score`,
          confidence: sql`excluded.confidence`,
          priceUsd: sql`excluded.price_usd`,
          payload: sql`excluded.payload`,
          computedAt: sql`now()`,
        },
      });
  }
}
