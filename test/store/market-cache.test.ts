import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
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

async function revisionMoves(db: Database): Promise<void> {
  const repo = await store(db);
  const r0 = await repo.revision();
  assert.match(r0.storeId, /^[0-9a-f-]{36}$/);
  assert.ok(r0.revision > 0, 'the writes so far moved the revision');
  await repo.writeFetched(BTC, { kind: 'candles', points: [candle('2025-01-03', 102)] });
  const r1 = await repo.revision();
  assert.ok(r1.revision > r0.revision, 'a new candle moves it');
  await repo.recordError(BTC, 'upstream down');
  const r2 = await repo.revision();
  assert.ok(r2.revision > r1.revision, 'a series state update moves it');
  await db.jobs.execute(sql`delete from market_candles where date = '2025-01-03'`);
  const r3 = await repo.revision();
  assert.ok(r3.revision > r2.revision, 'a delete moves it');
  await db.jobs.execute(sql`truncate market_funding`);
  assert.ok((await repo.revision()).revision > r3.revision, 'a truncate moves it');
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
  assert.equal((await repo.revision()).storeId, r0.storeId);
}

describe('market data cache', () => {
  test('PGlite: every statement writing the market tables moves the revision, a rolled-back one does not', async () => {
    await revisionMoves(await openDatabase({ pgliteDir: 'memory://' }));
  });

  test('PostgreSQL: the same', async (t) => {
    if (!(await postgresAvailable())) return t.skip(PG_SKIP);
    const pg = await createTempPgDatabase();
    after(pg.drop);
    await revisionMoves(await openDatabase({ databaseUrl: pg.url, pgliteDir: 'memory://' }));
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

  test('the embedded database: a restart reads the copy next to PGLITE_DIR, equal to what the store gave', async () => {
    const dir = path.join(tempDir(), 'pglite');
    const first = await createCore(testConfig({ PGLITE_DIR: dir }));
    const served = first.market.data;
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
