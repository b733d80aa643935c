// Part of `npm run bench` (bench/run.ts): the market-data store and the live ingest (issue #9).
//  1. The import of the bundled dataset at first start (fresh embedded database), against
//     parsing the same CSV files in the same run; then reading everything back from the store.
//  2. One live ingest round for all series, against a local fake of every upstream on loopback
//     (test/helpers/upstream.ts) serving 4 new days: the fetches, then the recompute (reload
//     from the store, every series, signal-history append, answer cache) — target < 2 s.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { loadConfig, ROOT_DIR } from '../src/config.ts';
import { createCore, prepareCore } from '../src/core.ts';
import { addDays } from '../src/engine/util.ts';
import { importBundledDataset } from '../src/jobs/import-dataset.ts';
import { DatasetProvider } from '../src/providers/dataset/dataset.ts';
import { StoredMarketProvider } from '../src/services/market-data.ts';
import { MarketService } from '../src/services/market.ts';
import { openDatabase } from '../src/store/db.ts';
import { MarketRepo } from '../src/store/market-repo.ts';
import { at, cutDataset, liveEnv } from '../test/helpers/live.ts';
import { startUpstream } from '../test/helpers/upstream.ts';

const ms = (a: number, b: number) => `${(b - a).toFixed(0)} ms`;

/** Runs both measurements and prints one line each (with the ratio to its same-run baseline). */
export async function benchIngest(): Promise<void> {
  // 1. Import at first start.
  const t0 = performance.now();
  await new DatasetProvider(path.join(ROOT_DIR, 'data')).load();
  const t1 = performance.now();
  const db = await openDatabase({ pgliteDir: 'memory://' });
  const t2 = performance.now();
  const imported = await importBundledDataset(new DatasetProvider(path.join(ROOT_DIR, 'data')), new MarketRepo(db.jobs));
  const t3 = performance.now();
  const stored = await new StoredMarketProvider(new MarketRepo(db.jobs)).load();
  const t4 = performance.now();
  await db.close();
  console.log(
    `import of the bundled dataset: ${imported.inserted} rows in ${ms(t2, t3)} (${((t3 - t2) / (t1 - t0)).toFixed(1)}x parsing the CSVs, ${ms(t0, t1)}); ` +
      `read back from the store ${ms(t3, t4)} (${((t4 - t3) / (t1 - t0)).toFixed(1)}x); PGlite open+migrate ${ms(t1, t2)}; ${stored.candles.size} assets`,
  );

  // 2. One ingest round of 4 new days against the fake upstreams.
  const cut = '2025-09-20';
  const days = 4;
  const today = addDays(cut, days + 1);
  const upstream = await startUpstream();
  upstream.setToday(today);
  const dataDir = cutDataset(cut);
  const core = await createCore(loadConfig({ PGLITE_DIR: 'memory://', LOG_LEVEL: 'silent', ...liveEnv(upstream, dataDir) }), {
    clock: () => new Date(at(today) + 3_600_000),
  });
  try {
    await prepareCore(core);
    const b0 = performance.now();
    await MarketService.create(new StoredMarketProvider(new MarketRepo(core.database.jobs)), null);
    const b1 = performance.now();
    const t5 = performance.now();
    const round = await core.ingest!.once();
    const t6 = performance.now();
    const rows = round.outcomes.reduce((s, o) => s + o.inserted, 0);
    const failed = round.outcomes.filter((o) => o.error).length;
    const fetchMs = t6 - t5 - round.recomputeMs;
    console.log(
      `ingest round (${round.outcomes.length} series, ${days} new days, ${rows} rows, ${failed} failed): fetch+store ${fetchMs.toFixed(0)} ms, ` +
        `recompute ${round.recomputeMs} ms (target < 2000 ms; ${(round.recomputeMs / (b1 - b0)).toFixed(2)}x computing every series once, ${ms(b0, b1)}), ` +
        `history +${round.historyInserted}, as of ${core.market.asOf}`,
    );
  } finally {
    await core.stop();
    await upstream.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
