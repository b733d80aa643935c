import { sql } from 'drizzle-orm';
import { bigint, check, date, doublePrecision, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { SERIES_KINDS } from '../engine/types.ts';

/** How a series' rows got here: the bundled dataset (data/) or a live upstream fetch. */
export const SERIES_ORIGINS = ['bundled', 'live'] as const;

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'string' });

/**
 * One row per market series: where it comes from and how fresh it is (docs/live-data.md,
 * "Freshness"). `newest_date` is the newest UTC day stored; `last_success_at` the last
 * successful fetch (null for a series only imported from the bundled dataset); `last_error`
 * the message of the last failed fetch, kept until the next success.
 */
export const marketSeries = pgTable('market_series', {
  series: text('series').primaryKey(),
  kind: text('kind', { enum: SERIES_KINDS }).notNull(),
  /** Asset id for candles and funding, chain id for metrics, null for Fear & Greed. */
  subject: text('subject'),
  /** Metric name for metric series (the engine's names, e.g. `tvl`), else null. */
  metric: text('metric'),
  source: text('source').notNull(),
  origin: text('origin', { enum: SERIES_ORIGINS }).notNull(),
  /** Expected cadence of new points, hours (24 for a daily series). */
  cadenceHours: integer('cadence_hours').notNull().default(24),
  newestDate: date('newest_date', { mode: 'string' }),
  lastSuccessAt: ts('last_success_at'),
  lastError: text('last_error'),
  lastErrorAt: ts('last_error_at'),
  updatedAt: ts('updated_at')
    .notNull()
    .default(sql`now()`),
});

/** Daily OHLCV candles per asset (UTC day of the candle's open; volume in base units, null when unknown). */
export const marketCandles = pgTable(
  'market_candles',
  {
    asset: text('asset').notNull(),
    date: date('date', { mode: 'string' }).notNull(),
    open: doublePrecision('open').notNull(),
    high: doublePrecision('high').notNull(),
    low: doublePrecision('low').notNull(),
    close: doublePrecision('close').notNull(),
    volume: doublePrecision('volume'),
    /** Venue or file the row came from, e.g. `binance_spot`. */
    source: text('source').notNull(),
  },
  (t) => [primaryKey({ columns: [t.asset, t.date] })],
);

/** The alternative.me Crypto Fear & Greed Index, one value (0..100) per UTC day. */
export const marketFearGreed = pgTable('market_fear_greed', {
  date: date('date', { mode: 'string' }).primaryKey(),
  value: integer('value').notNull(),
  classification: text('classification').notNull(),
  source: text('source').notNull(),
});

/**
 * Daily funding-rate means per asset, as the fraction per 8 hours the engine uses;
 * `interval_hours` is the venue's funding interval and `prints` the number of prints
 * averaged (null when the source gave only the daily mean).
 */
export const marketFunding = pgTable(
  'market_funding',
  {
    asset: text('asset').notNull(),
    date: date('date', { mode: 'string' }).notNull(),
    rate: doublePrecision('rate').notNull(),
    intervalHours: integer('interval_hours'),
    prints: integer('prints'),
    source: text('source').notNull(),
  },
  (t) => [primaryKey({ columns: [t.asset, t.date] })],
);

/** Daily chain metrics (the engine's metric names, e.g. `tvl`, `transactions`), per chain. */
export const marketChainMetrics = pgTable(
  'market_chain_metrics',
  {
    chain: text('chain').notNull(),
    metric: text('metric').notNull(),
    date: date('date', { mode: 'string' }).notNull(),
    value: doublePrecision('value').notNull(),
    source: text('source').notNull(),
  },
  (t) => [primaryKey({ columns: [t.chain, t.metric, t.date] })],
);

/** Imports of the bundled dataset: the fingerprint of the files imported, so a restart skips the work. */
export const marketImports = pgTable('market_imports', {
  name: text('name').primaryKey(),
  fingerprint: text('fingerprint').notNull(),
  rows: integer('rows').notNull(),
  importedAt: ts('imported_at')
    .notNull()
    .default(sql`now()`),
});

/**
 * The revision of the market data: one row. On the embedded database (PGlite, where the
 * setting `market_cache.revision = on` is in its postgresql.conf: src/store/db.ts), a
 * statement trigger on `market_series`, `market_candles`, `market_fear_greed`,
 * `market_funding` and `market_chain_metrics` increments `revision` and draws a new random
 * `token` on every INSERT, UPDATE, DELETE or TRUNCATE, in the writing transaction (migration
 * 0005); on PostgreSQL the trigger does nothing, so concurrent writers never queue on this row.
 * `store_id` is random per database. With the newest migration applied they tell whether a copy
 * of the market data (store/market-cache.ts) is still the store's content. A migration that
 * changes a market table keeps these triggers (drizzle-kit does not know them: re-create them
 * when a table is re-created).
 */
export const marketRevision = pgTable(
  'market_revision',
  {
    id: integer('id').primaryKey().default(1),
    storeId: uuid('store_id')
      .notNull()
      .default(sql`gen_random_uuid()`),
    revision: bigint('revision', { mode: 'number' }).notNull().default(0),
    token: uuid('token')
      .notNull()
      .default(sql`gen_random_uuid()`),
  },
  (t) => [check('market_revision_one_row', sql`${t.id} = 1`)],
);
