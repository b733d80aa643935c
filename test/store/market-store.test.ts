import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, ROOT_DIR } from '../../src/config.ts';
import { createCore } from '../../src/core.ts';
import { importBundledDataset } from '../../src/jobs/import-dataset.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { AsOfOutOfRangeError, checkAsOfBeforeImport, StoredMarketProvider } from '../../src/services/market-data.ts';
import { openDatabase, type Database } from '../../src/store/db.ts';
import { MarketRepo } from '../../src/store/market-repo.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';

// The market-data store (issue #9): the bundled dataset imported once with its provenance,
// read back by the engine exactly as the CSV files give it, the same on PGlite and PostgreSQL.

const DATA = path.join(ROOT_DIR, 'data');

async function checkStore(db: Database): Promise<void> {
  const repo = new MarketRepo(db.jobs);
  const first = await importBundledDataset(new DatasetProvider(DATA), repo);
  assert.equal(first.skipped, false);
  assert.ok(first.inserted > 40_000, `rows imported: ${first.inserted}`);
  const again = await importBundledDataset(new DatasetProvider(DATA), repo);
  assert.deepEqual(again, { skipped: true, inserted: 0, series: 0 }, 'the same files are not imported twice');

  const csv = await new DatasetProvider(DATA).load();
  const stored = await new StoredMarketProvider(repo).load();
  assert.equal(stored.asOf, csv.asOf);
  assert.deepEqual([...stored.candles.keys()].sort(), [...csv.candles.keys()].sort());
  for (const [asset, list] of csv.candles) assert.deepEqual(stored.candles.get(asset), list, `candles of ${asset}`);
  assert.deepEqual(stored.fearGreed, csv.fearGreed);
  for (const [asset, list] of csv.funding) assert.deepEqual(stored.funding.get(asset), list, `funding of ${asset}`);
  for (const [chain, rec] of csv.chains)
    for (const [metric, s] of Object.entries(rec))
      assert.deepEqual(stored.chains.get(chain)?.[metric]?.points, s.points, `${chain} ${metric}`);
  assert.deepEqual(stored.gaps, csv.gaps);
  // Provenance per row: the file and the venue.
  assert.match(stored.priceSources.get('bitcoin')!, /^data\/prices\/btc\.csv \(binance_spot\) 2018-03-17\.\.2025-09-30$/);
  const btc = stored.series.find((s) => s.series === 'candles:bitcoin')!;
  assert.equal(btc.origin, 'bundled');
  assert.equal(btc.newest_date, '2025-09-30');
  assert.equal(btc.last_success_at, null);

  // AS_OF outside the data is refused, naming the boundary.
  await assert.rejects(new StoredMarketProvider(repo).load('2030-01-01'), (e: unknown) => {
    assert.ok(e instanceof AsOfOutOfRangeError);
    assert.match((e as Error).message, /AS_OF 2030-01-01 is after the newest day of the data \(2025-09-30\); use 2025-09-30 or earlier/);
    return true;
  });
  await assert.rejects(new StoredMarketProvider(repo).load('2001-01-01'), /before the first day of the data \(2018-/);
  const cut = await new StoredMarketProvider(repo).load('2024-03-01');
  assert.equal(cut.candles.get('bitcoin')!.at(-1)!.date, '2024-03-01');
  // Freshness (GET /status) as of that day: no series shows a newest day after it, and each
  // shows the newest day it has on or before it (HYPE, listed 2024-12, has none yet).
  const at = new Map(cut.series.map((s) => [s.series, s.newest_date]));
  for (const s of cut.series) assert.ok(s.newest_date === null || s.newest_date <= '2024-03-01', `${s.series}: ${s.newest_date}`);
  assert.equal(at.get('candles:bitcoin'), '2024-03-01');
  assert.equal(at.get('fear_greed'), cut.fearGreed.at(-1)!.date);
  assert.equal(at.get('funding:bitcoin'), cut.funding.get('bitcoin')!.at(-1)!.date);
  assert.equal(at.get('metric:eth:tvl'), cut.chains.get('eth')!.tvl!.points.at(-1)!.date);
  assert.equal(at.get('candles:hyperliquid'), null);

  // HYPE's liquidations of 2025-04-23 (0 USD), which data/SOURCES.md calls incomplete, are a
  // gap, not a value: left out at load, and by the reader from a store that imported it
  // before they were (a bundled row is never rewritten); the served source says so.
  const liq = () => stored.chains.get('hype')!.liquidated_notional_usd!;
  assert.equal(csv.chains.get('hype')!.liquidated_notional_usd!.points.at(-1)!.date, '2025-04-22');
  assert.equal(liq().points.at(-1)!.date, '2025-04-22');
  assert.match(
    liq().source,
    /hyperliquid\.csv 2023-06-13\.\.2025-04-22, without 2025-04-23 \(data\/SOURCES\.md: the last value \(0\) is probably incomplete\)$/,
  );
  const spec = stored.series.find((x) => x.series === 'metric:hype:liquidated_notional_usd')!;
  const bundledSource = 'Hyperliquid stats daily_notional_liquidated_total (USD); data/chains/hyperliquid.csv';
  const liqSpec = {
    series: spec.series,
    kind: 'metric' as const,
    subject: 'hype',
    metric: 'liquidated_notional_usd',
    source: bundledSource,
    origin: 'bundled' as const,
    cadenceHours: 24,
  };
  const written = await repo.writeFetched(liqSpec, { kind: 'metric', points: [{ date: '2025-04-23', value: 0, source: bundledSource }] });
  assert.equal(written, 1);
  const old = await new StoredMarketProvider(repo).load();
  assert.deepEqual(old.chains.get('hype')!.liquidated_notional_usd!.points, liq().points);
  // Its freshness too: /status does not call the left-out day the newest.
  assert.equal(old.series.find((x) => x.series === spec.series)!.newest_date, '2025-04-22');
  // Cut before that day, the source does not mention it.
  const early = await new StoredMarketProvider(repo).load('2024-06-01');
  assert.doesNotMatch(early.chains.get('hype')!.liquidated_notional_usd!.source, /without/);
}

test("AS_OF past the data is refused before the import: the bundled files' newest price day, or a newer stored one", async () => {
  const bundled = new DatasetProvider(DATA);
  assert.equal(await bundled.newestPriceDay(), '2025-09-30');
  // Read from each file's tail: a newer last row counts (blank lines after it too), an empty
  // file is ignored.
  const copy = await mkdtemp(path.join(tmpdir(), 'prices-'));
  after(() => rm(copy, { recursive: true, force: true }));
  await cp(path.join(DATA, 'prices'), path.join(copy, 'prices'), { recursive: true });
  await appendFile(path.join(copy, 'prices', 'btc.csv'), '2026-01-05,1,1,1,1,1,1,binance_spot\n\n');
  await writeFile(path.join(copy, 'prices', 'ada.csv'), '');
  assert.equal(await new DatasetProvider(copy).newestPriceDay(), '2026-01-05');
  const store = (newest: string | null) => ({
    seriesStates: async () => [
      { series: 'candles:bitcoin', kind: 'candles', newestDate: newest },
      { series: 'fear_greed', kind: 'fear_greed', newestDate: '2031-01-01' },
    ],
  });
  // A new database (nothing stored): the bundled files decide.
  await assert.rejects(checkAsOfBeforeImport('2030-01-01', bundled, store(null) as never), (e: unknown) => {
    assert.ok(e instanceof AsOfOutOfRangeError);
    assert.match((e as Error).message, /AS_OF 2030-01-01 is after the newest day of the data \(2025-09-30\); use 2025-09-30 or earlier/);
    return true;
  });
  await checkAsOfBeforeImport('2025-09-30', bundled, store(null) as never);
  // Days a live ingest stored past the bundle are data too (only candles count, as when the data is cut).
  await checkAsOfBeforeImport('2025-10-03', bundled, store('2025-10-05') as never);
  await assert.rejects(
    checkAsOfBeforeImport('2025-10-06', bundled, store('2025-10-05') as never),
    /after the newest day of the data \(2025-10-05\)/,
  );
});

describe('market-data store', () => {
  const open: Database[] = [];
  const drops: (() => Promise<void>)[] = [];
  after(async () => {
    for (const d of open) await d.close();
    for (const d of drops) await d();
  });

  test('PGlite: the import is idempotent and the store reads back exactly the bundled data', async () => {
    const db = await openDatabase({ pgliteDir: 'memory://' });
    open.push(db);
    await checkStore(db);
  });

  test('a row of that day from another source (a live fetch) is kept: only the bundled one is left out', async () => {
    const db = await openDatabase({ pgliteDir: 'memory://' });
    open.push(db);
    const repo = new MarketRepo(db.jobs);
    await importBundledDataset(new DatasetProvider(DATA), repo);
    const source = 'Hyperliquid stats API daily_notional_liquidated_total';
    const spec = {
      series: 'metric:hype:liquidated_notional_usd',
      kind: 'metric' as const,
      subject: 'hype',
      metric: 'liquidated_notional_usd',
      source,
      origin: 'live' as const,
      cadenceHours: 24,
    };
    assert.equal(await repo.writeFetched(spec, { kind: 'metric', points: [{ date: '2025-04-23', value: 0, source }] }), 1);
    const liq = (await new StoredMarketProvider(repo).load()).chains.get('hype')!.liquidated_notional_usd!;
    assert.deepEqual(liq.points.at(-1), { date: '2025-04-23', value: 0 });
  });

  test('PostgreSQL: the same', async (t) => {
    if (!(await postgresAvailable())) return t.skip(PG_SKIP);
    const tmp = await createTempPgDatabase();
    drops.push(tmp.drop);
    const db = await openDatabase({ databaseUrl: tmp.url, pgliteDir: 'memory://' });
    open.push(db);
    await checkStore(db);
  });

  test('a start with AS_OF after the newest day, or AS_OF with LIVE=1, is refused with what to do', async () => {
    await assert.rejects(
      createCore(testConfig({ AS_OF: '2030-01-01' })),
      /after the newest day of the data \(2025-09-30\); use 2025-09-30 or earlier/,
    );
    await assert.rejects(createCore(testConfig({ AS_OF: '2025-01-01', LIVE: '1' })), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.match((e as Error).message, /AS_OF=2025-01-01 pins the served day, but LIVE=1 serves the newest data: unset one of them/);
      return true;
    });
  });
});
