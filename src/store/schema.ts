import { sql } from 'drizzle-orm';
import { date, doublePrecision, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, bigserial } from 'drizzle-orm/pg-core';

/**
 * Signal history: one row per change of an asset's signal level, with the factor snapshot
 * that produced it. Rows are computed point-in-time (from data up to `changed_at` only)
 * and never rewritten.
 */
export const signalHistory = pgTable(
  'signal_history',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    asset: text('asset').notNull(),
    /** UTC day of the daily candle on whose close the new signal was computed. */
    changedAt: date('changed_at', { mode: 'string' }).notNull(),
    signal: text('signal').notNull(),
    previousSignal: text('previous_signal'),
    score: doublePrecision('score').notNull(),
    confidence: doublePrecision('confidence').notNull(),
    priceUsd: doublePrecision('price_usd').notNull(),
    factors: jsonb('factors').notNull(),
    recordedAt: timestamp('recorded_at', { withTimezone: true, mode: 'string' }).notNull().default(sql`now()`),
  },
  (t) => [uniqueIndex('signal_history_asset_changed_at').on(t.asset, t.changedAt)],
);

/** The signal of each asset as served for one as-of day (the snapshot the API answers from). */
export const signalSnapshots = pgTable(
  'signal_snapshots',
  {
    asset: text('asset').notNull(),
    asOf: date('as_of', { mode: 'string' }).notNull(),
    signal: text('signal').notNull(),
    score: doublePrecision('score').notNull(),
    confidence: doublePrecision('confidence').notNull(),
    priceUsd: doublePrecision('price_usd').notNull(),
    payload: jsonb('payload').notNull(),
    computedAt: timestamp('computed_at', { withTimezone: true, mode: 'string' }).notNull().default(sql`now()`),
  },
  (t) => [primaryKey({ columns: [t.asset, t.asOf] })],
);

/**
 * Backfill progress per asset: the history is complete through `through_date` for the
 * dataset fingerprint and engine version recorded, so a restart does not redo it.
 */
export const backfillState = pgTable('backfill_state', {
  asset: text('asset').primaryKey(),
  throughDate: date('through_date', { mode: 'string' }).notNull(),
  engineVersion: text('engine_version').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'string' }).notNull().default(sql`now()`),
});
