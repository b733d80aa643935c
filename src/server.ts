import type { FastifyInstance } from 'fastify';
import type { Config } from './config.ts';
import { buildApp } from './http/app.ts';
import { DatasetProvider } from './providers/dataset/dataset.ts';
import { MarketService } from './services/market.ts';
import { openDatabase, type Database } from './store/db.ts';
import { HistoryRepo } from './store/history-repo.ts';

/** A started service: the app, its database and a way to stop both. */
export interface Service {
  app: FastifyInstance;
  market: MarketService;
  database: Database;
  stop(): Promise<void>;
}

/**
 * Builds the whole service from a config: opens the database (PGlite or PostgreSQL) and
 * migrates it, loads the dataset as of `AS_OF`, computes every series, backfills the
 * signal history (skipped when already done) and builds the HTTP app (not listening).
 */
export async function createService(config: Config, opts: { logStream?: NodeJS.WritableStream } = {}): Promise<Service> {
  const database = await openDatabase({ databaseUrl: config.DATABASE_URL, pgliteDir: config.PGLITE_DIR });
  try {
    const provider = new DatasetProvider(config.DATA_DIR);
    const market = await MarketService.create(provider, new HistoryRepo(database.db), config.AS_OF);
    const app = await buildApp({ config, market, database, logStream: opts.logStream });
    const t0 = performance.now();
    const result = await market.backfill();
    app.log.info(
      { ms: Math.round(performance.now() - t0), inserted: result.reduce((s, r) => s + r.inserted, 0), skipped: result.filter((r) => r.skipped).length },
      'signal history backfill',
    );
    market.warm();
    return {
      app,
      market,
      database,
      async stop() {
        await app.close();
        await database.close();
      },
    };
  } catch (err) {
    await database.close().catch(() => {});
    throw err;
  }
}
