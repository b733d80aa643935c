import { sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import {
  bigint,
  bigserial,
  date,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { PLAN_TIERS } from '../auth/tiers.ts';
import { THESIS_DIRECTIONS, type ThesisCondition } from '../engine/thesis.ts';
import { SIGNAL_LEVELS, type Factor, type LevelRule } from '../engine/types.ts';

// The market-data tables (candles, Fear & Greed, funding, chain metrics, series freshness).
export * from './market-schema.ts';

// The `enum` of a text column and `$type` of a jsonb column only type the rows in TypeScript:
// the SQL columns stay plain `text` / `jsonb` (no CHECK constraint, no migration).

/** A `timestamptz` column (ISO string in TypeScript) that defaults to the time of the insert. */
/**
 * A time-ordered id (UUIDv7, RFC 9562: 48-bit Unix milliseconds, then a counter that rises
 * within a millisecond in this process, then random bits) for rows listed newest first.
 * Lists order by creation time, then id; the embedded PostgreSQL (PGlite) keeps `now()` only to
 * the millisecond, so rows created in the same millisecond tie on time and a random id would
 * order them at random. Ids given by the application at insert; `gen_random_uuid()` stays the
 * column default for rows written outside it.
 */
export function timeOrderedId(): string {
  return uuidv7();
}

function timestampDefaultNow(name: string) {
  return timestamp(name, { withTimezone: true, mode: 'string' })
    .notNull()
    .default(sql`now()`);
}

/** Statuses of an API key. */
const KEY_STATUSES = ['active', 'revoked'] as const;

/**
 * Signal history: one row per change of an asset's signal level, with the factor snapshot
 * that produced it. Rows are computed point-in-time (from data up to `changed_at` only)
 * and never rewritten, except that a row stored without `level_rule` may get it once
 * (`runBackfill`, jobs/backfill.ts).
 */
export const signalHistory = pgTable(
  'signal_history',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    asset: text('asset').notNull(),
    /** UTC day of the daily candle on whose close the new signal was computed. */
    changedAt: date('changed_at', { mode: 'string' }).notNull(),
    signal: text('signal', { enum: SIGNAL_LEVELS }).notNull(),
    previousSignal: text('previous_signal', { enum: SIGNAL_LEVELS }),
    score: doublePrecision('score').notNull(),
    confidence: doublePrecision('confidence').notNull(),
    priceUsd: doublePrecision('price_usd').notNull(),
    factors: jsonb('factors').$type<Factor[]>().notNull(),
    /**
     * Why the signal took this level that day (engine `LevelRule`: band, hysteresis,
     * confirmation or volatility gate); null on rows stored before migration 0008 added it,
     * until the backfill fills it (where the recomputed change matches the row). jsonb keeps
     * its keys sorted: HistoryRepo.listChanges puts them back in the engine's order.
     */
    levelRule: jsonb('level_rule').$type<LevelRule>(),
    /** The signal model that computed the row (e.g. 'signals-v2'); each version has its own history. */
    modelVersion: text('model_version').notNull().default('signals-v1'),
    recordedAt: timestampDefaultNow('recorded_at'),
  },
  (t) => [uniqueIndex('signal_history_asset_model_changed_at').on(t.asset, t.modelVersion, t.changedAt)],
);

/** The signal of each asset as served for one as-of day (the snapshot the API answers from). */
export const signalSnapshots = pgTable(
  'signal_snapshots',
  {
    asset: text('asset').notNull(),
    asOf: date('as_of', { mode: 'string' }).notNull(),
    signal: text('signal', { enum: SIGNAL_LEVELS }).notNull(),
    score: doublePrecision('score').notNull(),
    confidence: doublePrecision('confidence').notNull(),
    priceUsd: doublePrecision('price_usd').notNull(),
    payload: jsonb('payload').notNull(),
    computedAt: timestampDefaultNow('computed_at'),
  },
  (t) => [primaryKey({ columns: [t.asset, t.asOf] })],
);

/**
 * Backfill progress per asset: the history is complete through `through_date` for the
 * dataset fingerprint and engine version recorded, so a restart does not redo it.
 * `level_rule_version` is the engine version for which the backfill has filled the null
 * `level_rule` of the asset's stored changes (rows from before migration 0008; migration
 * 0009), so it does not look for them again; null until it has.
 */
export const backfillState = pgTable('backfill_state', {
  asset: text('asset').primaryKey(),
  throughDate: date('through_date', { mode: 'string' }).notNull(),
  engineVersion: text('engine_version').notNull(),
  levelRuleVersion: text('level_rule_version'),
  updatedAt: timestampDefaultNow('updated_at'),
});

/**
 * Users of the API as known to this service: `id` is the identity provider's `sub`, `tier`
 * the user's plan (free by default; changed by the operator command `users set-tier`).
 */
export const appUsers = pgTable('app_users', {
  id: text('id').primaryKey(),
  email: text('email'),
  tier: text('tier', { enum: PLAN_TIERS }).notNull().default('free'),
  createdAt: timestampDefaultNow('created_at'),
  updatedAt: timestampDefaultNow('updated_at'),
});

/**
 * API keys: only the SHA-256 digest and a display prefix are stored, never the key.
 * Usage counters are flushed from memory in batches (see services/usage.ts).
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: uuid('id')
      .primaryKey()
      .default(sql`gen_random_uuid()`)
      .$defaultFn(timeOrderedId),
    userId: text('user_id')
      .notNull()
      .references(() => appUsers.id),
    name: text('name').notNull(),
    prefix: text('prefix').notNull(),
    keyHash: text('key_hash').notNull(),
    status: text('status', { enum: KEY_STATUSES }).notNull().default('active'),
    createdAt: timestampDefaultNow('created_at'),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'string' }),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'string' }),
    requestsTotal: bigint('requests_total', { mode: 'number' }).notNull().default(0),
    usageDay: date('usage_day', { mode: 'string' }),
    requestsDay: bigint('requests_day', { mode: 'number' }).notNull().default(0),
  },
  (t) => [uniqueIndex('api_keys_key_hash').on(t.keyHash), index('api_keys_user_id').on(t.userId)],
);

/** Theses: a user's trade idea with conditions, evaluated against current data. */
export const theses = pgTable(
  'theses',
  {
    id: uuid('id')
      .primaryKey()
      .default(sql`gen_random_uuid()`)
      .$defaultFn(timeOrderedId),
    userId: text('user_id')
      .notNull()
      .references(() => appUsers.id),
    asset: text('asset').notNull(),
    direction: text('direction', { enum: THESIS_DIRECTIONS }).notNull(),
    title: text('title').notNull(),
    entryPrice: doublePrecision('entry_price'),
    targetPrice: doublePrecision('target_price'),
    stopPrice: doublePrecision('stop_price'),
    horizonDays: integer('horizon_days'),
    conditions: jsonb('conditions').$type<ThesisCondition[]>().notNull(),
    createdAt: timestampDefaultNow('created_at'),
    updatedAt: timestampDefaultNow('updated_at'),
  },
  // The list's order (newest first, id breaking ties), so a page reads `limit` rows of the index.
  (t) => [index('theses_user_created').on(t.userId, t.createdAt.desc().nullsFirst(), t.id.desc().nullsFirst())],
);
