import { asc, sql } from 'drizzle-orm';
import type { ChainId, SeriesKind, SourcedPoints } from '../engine/types.ts';
import type { Db } from './db.ts';
import {
  marketCandles,
  marketChainMetrics,
  marketFearGreed,
  marketFunding,
  marketImports,
  marketRevision,
  marketSeries,
  type SERIES_ORIGINS,
} from './market-schema.ts';
import type { MarketCache, StoreRevision } from './market-cache.ts';

/** Where a series' rows came from. */
export type SeriesOrigin = (typeof SERIES_ORIGINS)[number];

type PointsOf<K extends SeriesKind> = Extract<SourcedPoints, { kind: K }>['points'];
/** A stored candle with the venue or file it came from. */
export type StoredCandle = PointsOf<'candles'>[number];
/** A stored daily funding mean (fraction per 8 h) with its venue's interval and print count. */
export type StoredFunding = PointsOf<'funding'>[number];
/** A stored chain-metric value with its source. */
export type StoredMetric = PointsOf<'metric'>[number];
/** A stored Fear & Greed value with its source. */
export type StoredFearGreed = PointsOf<'fear_greed'>[number];

/** Identity and provenance of one series (see `market_series`). */
export interface SeriesSpec {
  /** `candles:<asset>`, `fear_greed`, `funding:<asset>` or `metric:<chain>:<metric>`. */
  series: string;
  kind: SeriesKind;
  /** Asset id (candles, funding), chain id (metric) or null (Fear & Greed). */
  subject: string | null;
  metric: string | null;
  source: string;
  origin: SeriesOrigin;
  /** Expected cadence of new points, hours. */
  cadenceHours: number;
}

/**
 * A series with its freshness: newest day stored, last successful fetch and last error
 * (timestamps as the database writes them; `isoTimestamp` in store/timestamps.ts reads them).
 */
export interface SeriesState extends SeriesSpec {
  newestDate: string | null;
  lastSuccessAt: string | null;
  lastError: string | null;
  lastErrorAt: string | null;
}

/** Points of one series, by kind. */
export type SeriesRows = SourcedPoints;

/** Everything stored, ascending by date per series. */
export interface StoredMarket {
  candles: Map<string, StoredCandle[]>;
  fearGreed: StoredFearGreed[];
  funding: Map<string, StoredFunding[]>;
  metrics: Map<ChainId, Map<string, StoredMetric[]>>;
  series: SeriesState[];
}

/** Rows per INSERT statement (well under PostgreSQL's 65,535 parameters). */
const BATCH = 5000;

/** Builds the series id of a kind and subject (docs/live-data.md, "Series"). */
export function seriesId(kind: SeriesKind, subject: string | null, metric: string | null = null): string {
  if (kind === 'fear_greed') return 'fear_greed';
  if (kind === 'metric') return `metric:${subject}:${metric}`;
  return `${kind}:${subject}`;
}

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * Market data storage (candles, Fear & Greed, funding, chain metrics and the freshness of
 * each series), the same on PGlite and PostgreSQL, so several instances sharing PostgreSQL
 * share one copy. Stored points are never rewritten: a re-import or a repeated fetch of a
 * day already stored keeps the stored row (ON CONFLICT DO NOTHING).
 */
export class MarketRepo {
  constructor(private readonly db: Db) {}

  /** The fingerprint of the last import named `name`, or null when never imported. */
  async importFingerprint(name: string): Promise<string | null> {
    const rows = await this.db
      .select({ f: marketImports.fingerprint })
      .from(marketImports)
      .where(sql`${marketImports.name} = ${name}`);
    return rows[0]?.f ?? null;
  }

  /**
   * Imports several series in one transaction (all or nothing) and records the import's
   * fingerprint: the first start's import of the bundled dataset.
   * @returns the number of rows inserted (rows already stored are kept as they are).
   */
  async importAll(name: string, fingerprint: string, series: { spec: SeriesSpec; rows: SeriesRows }[]): Promise<number> {
    return this.db.transaction(async (tx) => {
      // Instances starting at once import one after the other; the later ones find it done.
      await tx.execute(sql`SELECT pg_advisory_xact_lock(727303)`);
      const done = await tx
        .select({ f: marketImports.fingerprint })
        .from(marketImports)
        .where(sql`${marketImports.name} = ${name}`);
      if (done[0]?.f === fingerprint) return 0;
      let inserted = 0;
      for (const s of series) inserted += await this.#write(tx, s.spec, s.rows, false);
      await tx
        .insert(marketImports)
        .values({ name, fingerprint, rows: inserted })
        .onConflictDoUpdate({ target: marketImports.name, set: { fingerprint, rows: inserted, importedAt: sql`now()` } });
      return inserted;
    });
  }

  /**
   * Writes the newly fetched points of one series in one transaction and records a successful
   * fetch (clearing the last error).
   * @returns the number of rows inserted.
   */
  async writeFetched(spec: SeriesSpec, rows: SeriesRows): Promise<number> {
    return this.db.transaction((tx) => this.#write(tx, spec, rows, true));
  }

  /** Records a failed fetch of a series: its points and newest date stay as they are. */
  async recordError(spec: SeriesSpec, message: string): Promise<void> {
    await this.db
      .insert(marketSeries)
      .values({ ...spec, lastError: message, lastErrorAt: sql`now()` })
      .onConflictDoUpdate({ target: marketSeries.series, set: { lastError: message, lastErrorAt: sql`now()`, updatedAt: sql`now()` } });
  }

  async #write(tx: Tx, spec: SeriesSpec, rows: SeriesRows, fetched: boolean): Promise<number> {
    let inserted = 0;
    const pts = rows.points;
    for (let i = 0; i < pts.length; i += BATCH) {
      const chunk = pts.slice(i, i + BATCH);
      inserted += await this.#insert(tx, spec, { kind: rows.kind, points: chunk } as SeriesRows);
    }
    const newest = pts.length ? pts.reduce((m, p) => (p.date > m ? p.date : m), pts[0]!.date) : null;
    const set: Record<string, unknown> = {
      newestDate: newest ? sql`greatest(${marketSeries.newestDate}, ${newest}::date)` : marketSeries.newestDate,
      updatedAt: sql`now()`,
    };
    if (fetched)
      Object.assign(set, { lastSuccessAt: sql`now()`, lastError: null, lastErrorAt: null, origin: spec.origin, source: spec.source });
    await tx
      .insert(marketSeries)
      .values({ ...spec, newestDate: newest, ...(fetched ? { lastSuccessAt: sql`now()` } : {}) })
      .onConflictDoUpdate({ target: marketSeries.series, set });
    return inserted;
  }

  /**
   * Inserts one chunk of points with a single parameter (the rows as JSON, expanded by
   * `jsonb_to_recordset` in the database): far fewer bind parameters and round trips than a
   * multi-row VALUES list, which matters for the first start's import on PGlite.
   * @returns the number of rows inserted (points already stored are kept).
   */
  async #insert(tx: Tx, spec: SeriesSpec, rows: SeriesRows): Promise<number> {
    if (rows.points.length === 0) return 0;
    const subject = spec.subject ?? '';
    let stmt;
    switch (rows.kind) {
      case 'candles': {
        const json = JSON.stringify(
          rows.points.map((p) => ({
            asset: subject,
            date: p.date,
            open: p.open,
            high: p.high,
            low: p.low,
            close: p.close,
            volume: p.volume,
            source: p.source,
          })),
        );
        stmt = sql`INSERT INTO market_candles (asset, date, open, high, low, close, volume, source)
          SELECT asset, date, open, high, low, close, volume, source FROM jsonb_to_recordset(${json}::jsonb)
          AS x(asset text, date date, open double precision, high double precision, low double precision, close double precision, volume double precision, source text)
          ON CONFLICT DO NOTHING RETURNING 1`;
        break;
      }
      case 'fear_greed': {
        const json = JSON.stringify(
          rows.points.map((p) => ({ date: p.date, value: p.value, classification: p.classification, source: p.source })),
        );
        stmt = sql`INSERT INTO market_fear_greed (date, value, classification, source)
          SELECT date, value, classification, source FROM jsonb_to_recordset(${json}::jsonb)
          AS x(date date, value integer, classification text, source text)
          ON CONFLICT DO NOTHING RETURNING 1`;
        break;
      }
      case 'funding': {
        const json = JSON.stringify(
          rows.points.map((p) => ({
            asset: subject,
            date: p.date,
            rate: p.rate,
            interval_hours: p.interval_hours,
            prints: p.prints,
            source: p.source,
          })),
        );
        stmt = sql`INSERT INTO market_funding (asset, date, rate, interval_hours, prints, source)
          SELECT asset, date, rate, interval_hours, prints, source FROM jsonb_to_recordset(${json}::jsonb)
          AS x(asset text, date date, rate double precision, interval_hours integer, prints integer, source text)
          ON CONFLICT DO NOTHING RETURNING 1`;
        break;
      }
      case 'metric': {
        const json = JSON.stringify(
          rows.points.map((p) => ({ chain: subject, metric: spec.metric ?? '', date: p.date, value: p.value, source: p.source })),
        );
        stmt = sql`INSERT INTO market_chain_metrics (chain, metric, date, value, source)
          SELECT chain, metric, date, value, source FROM jsonb_to_recordset(${json}::jsonb)
          AS x(chain text, metric text, date date, value double precision, source text)
          ON CONFLICT DO NOTHING RETURNING 1`;
        break;
      }
    }
    const counted = sql`WITH ins AS (${stmt}) SELECT count(*)::int AS n FROM ins`;
    const res = (await tx.execute(counted)) as unknown as { rows: { n: number }[] };
    return Number(res.rows[0]?.n ?? 0);
  }

  /** Every series' freshness state, by series id. */
  async seriesStates(): Promise<SeriesState[]> {
    const rows = await this.db.select().from(marketSeries).orderBy(asc(marketSeries.series));
    return rows.map((r) => ({
      series: r.series,
      kind: r.kind,
      subject: r.subject,
      metric: r.metric,
      source: r.source,
      origin: r.origin,
      cadenceHours: r.cadenceHours,
      newestDate: r.newestDate,
      lastSuccessAt: r.lastSuccessAt,
      lastError: r.lastError,
      lastErrorAt: r.lastErrorAt,
    }));
  }

  /**
   * The store's revision (the `market_revision` row, migration 0005, and the newest migration
   * applied): on the embedded database every statement that writes a market table moves
   * `revision` and `token`, in its transaction.
   * @throws when the row is missing (migrations not applied) or the database fails.
   */
  async revision(): Promise<StoreRevision> {
    const res = (await this.db.execute(sql`select store_id::text as "storeId", revision::int8 as revision, token::text as token,
        (select coalesce(max(created_at), 0)::text from drizzle.__drizzle_migrations) as migration
      from ${marketRevision}`)) as unknown as { rows: { storeId: string; revision: number | string; token: string; migration: string }[] };
    const r = res.rows[0];
    if (!r) throw new Error('market_revision has no row: the database is not migrated (migration 0005)');
    return { storeId: r.storeId, revision: Number(r.revision), token: r.token, migration: r.migration };
  }

  /**
   * {@link loadAll} through `cache`: the cached copy when it was taken at the store's current
   * revision, else the tables' content, then written to the cache (serialized before this
   * returns, written to disk in the background; a failed write goes to `onWriteError`).
   * The revision is read before the tables, so a copy never claims a revision newer than
   * its content (docs/architecture.md, "Market data cache").
   * @returns the content, where it came from, and the cache write (settles when the file is
   *   written or the write failed; never rejects).
   */
  async loadAllCached(
    cache: MarketCache<StoredMarket>,
    onWriteError: (e: unknown) => void,
  ): Promise<{ data: StoredMarket; from: 'cache' | 'store'; written: Promise<void> }> {
    const at = await this.revision();
    const hit = cache.read(at);
    if (hit) return { data: hit, from: 'cache', written: Promise.resolve() };
    const data = await this.loadAll();
    const written = cache.write(at, data).catch(onWriteError);
    return { data, from: 'store', written };
  }

  /**
   * Reads everything stored, each series ascending by date.
   *
   * Each table comes back as one JSON array per series (`json_agg`, parsed by JSON.parse)
   * instead of one protocol row per day: on PGlite, whose result rows are decoded in
   * JavaScript, the rows of the bundled dataset took 525-833 ms and the arrays 150-224 ms
   * (warm start, docs/benchmarks.md "Start-up"). Values are exact: PostgreSQL writes a double
   * in JSON with the shortest text that reads back as the same double (float8 output since
   * PostgreSQL 12); test/store/market-store.test.ts compares every value read back with the
   * bundled CSV files, on PGlite and on PostgreSQL.
   */
  async loadAll(): Promise<StoredMarket> {
    type Arrays = { k: string; m?: string; j: string }[];
    const arrays = async (query: ReturnType<typeof sql>): Promise<Arrays> =>
      ((await this.db.execute(query)) as unknown as { rows: Arrays }).rows;
    const parse = <T>(j: string): T => JSON.parse(j) as T;
    const [candleRows, fgRows, fundingRows, metricRows, series] = [
      await arrays(sql`select asset as k, json_agg(json_build_array(date, open, high, low, close, volume, source) order by date)::text as j
        from ${marketCandles} group by asset order by asset`),
      await arrays(sql`select '' as k, coalesce(json_agg(json_build_array(date, value, classification, source) order by date), '[]')::text as j
        from ${marketFearGreed}`),
      await arrays(sql`select asset as k, json_agg(json_build_array(date, rate, interval_hours, prints, source) order by date)::text as j
        from ${marketFunding} group by asset order by asset`),
      await arrays(sql`select chain as k, metric as m, json_agg(json_build_array(date, value, source) order by date)::text as j
        from ${marketChainMetrics} group by chain, metric order by chain, metric`),
      await this.seriesStates(),
    ];
    type CandleTuple = [string, number, number, number, number, number | null, string];
    const candles = new Map<string, StoredCandle[]>();
    for (const r of candleRows)
      candles.set(
        r.k,
        parse<CandleTuple[]>(r.j).map(([date, open, high, low, close, volume, source]) => ({
          date,
          open,
          high,
          low,
          close,
          volume,
          source,
        })),
      );
    type FundingTuple = [string, number, number | null, number | null, string];
    const funding = new Map<string, StoredFunding[]>();
    for (const r of fundingRows)
      funding.set(
        r.k,
        parse<FundingTuple[]>(r.j).map(([date, rate, interval_hours, prints, source]) => ({ date, rate, interval_hours, prints, source })),
      );
    const metrics = new Map<ChainId, Map<string, StoredMetric[]>>();
    for (const r of metricRows) {
      const chain = r.k as ChainId;
      let m = metrics.get(chain);
      if (!m) metrics.set(chain, (m = new Map()));
      m.set(
        r.m!,
        parse<[string, number, string][]>(r.j).map(([date, value, source]) => ({ date, value, source })),
      );
    }
    const fearGreed = parse<[string, number, string, string][]>(fgRows[0]!.j).map(([date, value, classification, source]) => ({
      date,
      value,
      classification,
      source,
    }));
    return { candles, fearGreed, funding, metrics, series };
  }
}
