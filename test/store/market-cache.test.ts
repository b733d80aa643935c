import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, cpSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { createCore } from '../../src/core.ts';
import { openDatabase, type Database } from '../../src/store/db.ts';
import { MarketCache } from '../../src/store/market-cache.ts';
import { MarketRepo, type SeriesSpec, type StoredMarket } from '../../src/store/market-repo.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';

// The market data cache (docs/architecture.md, "Market data cache"): a copy of the store's
// market tables in a file, used only while no statement has written them since it was taken.

const BTC: SeriesSpec = {
  series: 'candles:bitcoin',
  kind: 'candles',
  subject: 'bitcoin',
  metric: null,
  source: 'test',
  origin: 'live',
  cadenceHours: 24,
};
const candle = (date: string, close: number) => ({ date, open: close, high: close, low: close, close, volume: 1, source: 'test' });

const tmp: string[] = [];
const open: Database[] = [];
after(async () => {
  for (const d of open) await d.close();
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});
async function track(db: Promise<Database>): Promise<Database> {
  const d = await db;
  open.push(d);
  return d;
}
function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'market-cache-'));
  tmp.push(d);
  return d;
}

/** A store with two candles of bitcoin and its repository. */
async function store(db: Database): Promise<MarketRepo> {
  open.push(db);
  const repo = new MarketRepo(db.jobs);
  await repo.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-01', 100), candle('2025-01-02', 101)] });
  return repo;
}

const MARKET_TABLES = ['market_series', 'market_candles', 'market_fear_greed', 'market_funding', 'market_chain_metrics'];

/** Writes of every kind to every market table, each checked to move (or, on PostgreSQL, not move) the revision. */
async function revisionFollowsWrites(db: Database, moves: boolean): Promise<void> {
  const repo = await store(db);
  const r0 = await repo.revision();
  assert.match(r0.storeId, /^[0-9a-f-]{36}$/);
  assert.match(r0.migration, /^\d+$/);
  const writes: [string, () => Promise<unknown>][] = [
    ['insert candles', () => repo.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-03', 102)] })],
    [
      'insert fear & greed',
      () =>
        repo.writeFetched(
          { ...BTC, series: 'fear_greed', kind: 'fear_greed', subject: null },
          { kind: 'fear_greed', points: [{ date: '2025-01-01', value: 50, classification: 'Neutral', source: 'test' }] },
        ),
    ],
    [
      'insert funding',
      () =>
        repo.writeFetched(
          { ...BTC, series: 'funding:bitcoin', kind: 'funding' },
          { kind: 'funding', points: [{ date: '2025-01-01', rate: 0.0001, interval_hours: 8, prints: 3, source: 'test' }] },
        ),
    ],
    [
      'insert chain metric',
      () =>
        repo.writeFetched(
          { ...BTC, series: 'metric:ethereum:tvl', kind: 'metric', subject: 'ethereum', metric: 'tvl' },
          { kind: 'metric', points: [{ date: '2025-01-01', value: 1e9, source: 'test' }] },
        ),
    ],
    ['update series state', () => repo.recordError(BTC, 'upstream down')],
  ];
  // A statement trigger fires even when no row matches: every table, every kind of statement.
  for (const table of MARKET_TABLES) {
    writes.push([`update ${table}`, () => db.jobs.execute(sql.raw(`update ${table} set source = source where false`))]);
    writes.push([`delete ${table}`, () => db.jobs.execute(sql.raw(`delete from ${table} where false`))]);
  }
  // TRUNCATE last: it empties the tables (market_series last, as the others point at it).
  for (const table of [...MARKET_TABLES.slice(1), 'market_series'])
    writes.push([`truncate ${table}`, () => db.jobs.execute(sql.raw(`truncate ${table} cascade`))]);
  for (const [what, write] of writes) {
    const before = await repo.revision();
    await write();
    const after = await repo.revision();
    assert.equal(after.storeId, before.storeId);
    if (moves) {
      assert.ok(after.revision > before.revision, `${what} moves the revision`);
      assert.notEqual(after.token, before.token, `${what} draws a new token`);
    } else assert.deepEqual(after, before, `${what} leaves market_revision alone on PostgreSQL`);
  }
  // A write that rolls back leaves it where it was.
  const before = await repo.revision();
  await assert.rejects(
    db.jobs.transaction(async (tx) => {
      await tx.execute(
        sql`insert into market_fear_greed (date, value, classification, source) values ('2025-01-01', 50, 'Neutral', 'test')`,
      );
      throw new Error('abort');
    }),
    /abort/,
  );
  assert.deepEqual(await repo.revision(), before);
}

describe('market data cache', () => {
  test('PGlite: every statement writing a market table moves the revision and the token, a rolled-back one does not', async () => {
    await revisionFollowsWrites(await openDatabase({ pgliteDir: 'memory://' }), true);
  });

  test('PostgreSQL: the triggers leave market_revision alone (no cache there; writers never queue on its row)', async (t) => {
    if (!(await postgresAvailable())) return t.skip(PG_SKIP);
    const pg = await createTempPgDatabase();
    after(pg.drop);
    await revisionFollowsWrites(await openDatabase({ databaseUrl: pg.url, pgliteDir: 'memory://' }), false);
  });

  test('a copy is read only at the revision it was taken at; anything else reads the store', async () => {
    const repo = await store(await openDatabase({ pgliteDir: 'memory://' }));
    const cache = new MarketCache<StoredMarket>(path.join(tempDir(), 'pglite.market-cache'));
    const errors: unknown[] = [];
    const onError = (e: unknown) => errors.push(e);

    const first = await repo.loadAllCached(cache, onError);
    assert.equal(first.from, 'store');
    await first.written;
    assert.ok(existsSync(cache.file));
    const second = await repo.loadAllCached(cache, onError);
    assert.equal(second.from, 'cache');
    assert.deepEqual(second.data, await repo.loadAll(), 'the copy is the store content');
    assert.deepEqual(
      second.data.candles.get('bitcoin')!.map((c) => c.close),
      [100, 101],
    );

    // New data: a miss, and the new candle is served, never the old copy.
    await repo.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-03', 102)] });
    const third = await repo.loadAllCached(cache, onError);
    assert.equal(third.from, 'store');
    assert.deepEqual(
      third.data.candles.get('bitcoin')!.map((c) => c.close),
      [100, 101, 102],
    );
    await third.written;
    const fourth = await repo.loadAllCached(cache, onError);
    assert.equal(fourth.from, 'cache');
    assert.deepEqual(
      fourth.data.candles.get('bitcoin')!.map((c) => c.close),
      [100, 101, 102],
    );

    // A damaged file is a miss (and is written again).
    writeFileSync(cache.file, 'not a cache');
    const fifth = await repo.loadAllCached(cache, onError);
    assert.equal(fifth.from, 'store');
    await fifth.written;
    assert.equal((await repo.loadAllCached(cache, onError)).from, 'cache');

    // Another store at the same revision number: its id differs, so the copy is a miss there.
    const other = await store(await openDatabase({ pgliteDir: 'memory://' }));
    await other.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-03', 999)] });
    assert.equal((await other.revision()).revision, (await repo.revision()).revision);
    const foreign = new MarketCache<StoredMarket>(path.join(tempDir(), 'copied.market-cache'));
    copyFileSync(cache.file, foreign.file);
    const read = await other.loadAllCached(foreign, onError);
    assert.equal(read.from, 'store');
    assert.equal(read.data.candles.get('bitcoin')!.at(-1)!.close, 999);
    await read.written;
    assert.deepEqual(errors, []);

    // A write that fails is reported, and the load still answers from the store.
    const blocked = new MarketCache<StoredMarket>(path.join(tempDir(), 'missing-folder', 'x.market-cache'));
    const r = await repo.loadAllCached(blocked, onError);
    await r.written;
    assert.equal(r.from, 'store');
    assert.equal(errors.length, 1);
  });

  test('a copied database folder that diverges reaches the same revision number with another token: a miss', async () => {
    const root = tempDir();
    const first = await openDatabase({ pgliteDir: path.join(root, 'a') });
    await store(first);
    await first.close();
    open.splice(open.indexOf(first), 1);
    cpSync(path.join(root, 'a'), path.join(root, 'b'), { recursive: true });
    const a = new MarketRepo((await track(openDatabase({ pgliteDir: path.join(root, 'a') }))).jobs);
    const b = new MarketRepo((await track(openDatabase({ pgliteDir: path.join(root, 'b') }))).jobs);
    const [ra, rb] = [await a.revision(), await b.revision()];
    assert.deepEqual(rb, ra, 'a copy is the same store at the same revision');
    await a.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-03', 102)] });
    await b.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-03', 999)] });
    const [wa, wb] = [await a.revision(), await b.revision()];
    assert.equal(wa.storeId, wb.storeId);
    assert.equal(wa.revision, wb.revision);
    assert.notEqual(wa.token, wb.token);
    const cache = new MarketCache<StoredMarket>(path.join(root, 'a.market-cache'));
    await (
      await a.loadAllCached(cache, (e) => assert.fail(String(e)))
    ).written;
    const fromB = await b.loadAllCached(cache, () => {});
    assert.equal(fromB.from, 'store', "a's copy is not b's content");
    assert.equal(fromB.data.candles.get('bitcoin')!.at(-1)!.close, 999);
  });

  test('the embedded database: a restart reads the copy next to PGLITE_DIR, equal to what the store gave', async () => {
    const dir = path.join(tempDir(), 'pglite');
    const first = await createCore(testConfig({ PGLITE_DIR: dir }));
    const served = first.market.data;
    // Stopped once: a second stop (mcp --stdio closes the core on a refused key and again on
    // its stop) is the first one, not a second close of a closed database.
    const stopping = first.stop();
    assert.equal(first.stop(), stopping);
    await stopping;
    await first.stop();
    const file = `${dir}.market-cache`;
    assert.ok(existsSync(file), 'the first start wrote the copy');
    const written = statSync(file).mtimeMs;
    const again = await createCore(testConfig({ PGLITE_DIR: dir }));
    try {
      assert.deepEqual(again.market.data, served);
      assert.equal(statSync(file).mtimeMs, written, 'the restart read the copy and did not write it again');
    } finally {
      await again.stop();
    }
  });
});
