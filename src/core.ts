import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ConfigError, type Config } from './config.ts';
import { loggableError, OutageLog } from './errors.ts';
import { runBackfill, type BackfillResult } from './jobs/backfill.ts';
import { importBundledDataset } from './jobs/import-dataset.ts';
import type { IngestRound, IngestSchedule } from './jobs/ingest.ts';
import type { UpstreamName } from './providers/live/index.ts';
import { newestCompleteDay } from './services/freshness.ts';
import { DatasetProvider } from './providers/dataset/dataset.ts';
import type { MarketDataProvider } from './providers/port.ts';
import { TierRateLimiter } from './rate-limit/limiter.ts';
import { Access } from './services/access.ts';
import { KeyNotices, KeyService } from './services/keys.ts';
import { checkAsOfBeforeImport, StoredMarketProvider } from './services/market-data.ts';
import { MarketService } from './services/market.ts';
import type { Services } from './services/operation.ts';
import { ThesisService } from './services/theses.ts';
import { UsageTracker } from './services/usage.ts';
import { openDatabase, pgliteSibling, type Database } from './store/db.ts';
import { HistoryRepo } from './store/history-repo.ts';
import { KeyRepo } from './store/key-repo.ts';
import { MarketCache } from './store/market-cache.ts';
import { MarketRepo, type StoredMarket } from './store/market-repo.ts';
import { ThesisRepo } from './store/thesis-repo.ts';
import { UserRepo } from './store/user-repo.ts';
import { createLogger } from './logger.ts';

/**
 * The framework-free core of the service (docs/architecture.md): the database and its
 * repositories, the market state, keys, theses, usage, the rate limiter and the access rules.
 * Every surface is built on it: the HTTP app (REST, identity, MCP over HTTP; src/server.ts),
 * MCP over stdio, and the operator commands (src/cli.ts). It loads neither Fastify nor the
 * MCP SDK.
 */
export interface Core extends Services {
  config: Config;
  /** The process's structured (JSON) logger; Fastify logs through it too. */
  log: Logger;
  database: Database;
  /** The repositories: users, API keys, theses, signal history. */
  repos: { users: UserRepo; keys: KeyRepo; theses: ThesisRepo; history: HistoryRepo };
  usage: UsageTracker;
  limiter: TierRateLimiter;
  /** Who may call what: one module for REST and MCP. */
  access: Access;
  redis: Redis | null;
  /**
   * The live ingest (LIVE=1), or null offline: `start()` schedules it (src/server.ts, after
   * the start-up), `once()` runs one round of every series (`ingest --once`).
   */
  ingest: { start(): void; once(): Promise<IngestRound> } | null;
  /**
   * Stops the usage flush (writing what is pending), disconnects Redis and closes the database.
   * Once: a later call returns the first call's promise (`mcp --stdio` closes the core when the
   * key is refused and again when it stops).
   */
  stop(): Promise<void>;
}

export { createLogger, flushLogger } from './logger.ts';

/**
 * Logs one start-up phase as a JSON line: `{phase, ms, ...extra, msg: 'start-up: <what>'}`,
 * `ms` being the phase's wall-clock duration since `t0` (a `performance.now()` value).
 * @returns the current `performance.now()`, the start of the next phase.
 */
export function logPhase(log: Logger, phase: string, what: string, t0: number, extra: Record<string, unknown> = {}): number {
  const now = performance.now();
  log.info({ phase, ms: Math.round(now - t0), ...extra }, `start-up: ${what}`);
  return now;
}

/** How often the Redis connection is probed for a stall (PING), ms. */
const REDIS_PROBE_MS = 500;

/**
 * Connects ioredis for the rate limiter with bounded waits: each command gives up after
 * `commandTimeout` ms (the limiter then counts in per-instance memory, as on an error), a
 * connection attempt after `connectTimeout` ms, and nothing is queued while disconnected.
 * A stalled server (it accepts but does not answer) is detected by a PING every
 * REDIS_PROBE_MS: when it times out, the connection is dropped (within `commandTimeout` more)
 * and re-established, so that while it is not ready the limiter goes to memory at once
 * instead of waiting for each command's timeout. Failures are logged once per outage. Every key, in commands and in
 * scripts' KEYS, gets `keyPrefix` (REDIS_KEY_PREFIX, ioredis `keyPrefix`).
 */
function connectRedis(
  RedisClient: typeof Redis,
  url: string,
  log: Logger,
  t: { commandTimeout: number; connectTimeout: number; keyPrefix: string },
): Redis {
  const redis = new RedisClient(url, {
    keyPrefix: t.keyPrefix,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: t.commandTimeout,
    connectTimeout: t.connectTimeout,
    // Dropping the connection (below, on a PING timeout) ends the socket gracefully and waits
    // for the peer to close its side, which a stalled server never does: ioredis destroys it
    // after disconnectTimeout (default 2 s), and until then the status stays 'ready' (so
    // /metrics dependency_up said 1 for about 2 s more). A peer that does not close within a
    // command's timeout is treated as stalled.
    disconnectTimeout: t.commandTimeout,
    retryStrategy: (n) => Math.min(n * 200, 2000),
  });
  let down = false;
  const markDown = (err: unknown) => {
    if (!down) log.warn({ err }, 'Redis unavailable: rate limits fall back to per-instance memory until it returns');
    down = true;
  };
  redis.on('error', markDown);
  redis.on('ready', () => {
    if (down) log.info('Redis is back: rate limits are shared again');
    down = false;
  });
  const probe = setInterval(() => {
    if (redis.status !== 'ready') return;
    redis.ping().catch((err: Error) => {
      if (redis.status !== 'ready') return;
      markDown(err);
      redis.disconnect(true);
    });
  }, REDIS_PROBE_MS);
  probe.unref();
  redis.on('end', () => clearInterval(probe));
  return redis;
}

/**
 * Between two start-up phases: throws `signal`'s reason once it is aborted. The event loop gets
 * a full turn first, since a phase's end runs straight on into the next (promise
 * continuations): a SIGTERM that came during the phase is read in the loop's poll phase, so its
 * handler runs (and aborts) only then. A timer, then an immediate: whichever phase of the loop
 * this is called from, a poll phase lies between the two.
 */
export async function stopPoint(signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return;
  await new Promise((r) => setTimeout(r, 0));
  await new Promise((r) => setImmediate(r));
  signal.throwIfAborted();
}

/**
 * Builds the core from a config: opens and migrates the database (PGlite or PostgreSQL),
 * loads the dataset as of AS_OF and computes every series, and sets up keys, theses, usage
 * counting, rate limits (memory or Redis) and access. JWT verification is configured here
 * for an external identity provider (AUTH_ISSUER); the embedded one is attached later by the
 * server (`core.access.useJwtVerifier`), since it lives in the database opened here.
 * `opts.clock` is the wall clock of the live mode (freshness, what "today" is); tests set it.
 * `opts.signal` stops the start-up between its phases (database, import, series): the
 * database is closed cleanly (never cut off mid-write) and the signal's reason is thrown.
 * @throws ConfigError, DatabaseInUseError, DataValidationError or RangeError (AS_OF before the
 *   data) with a message naming the problem, or `opts.signal`'s reason once it is aborted;
 *   nothing stays open when it throws.
 */
export async function createCore(
  config: Config,
  opts: { logStream?: NodeJS.WritableStream; log?: Logger; clock?: () => Date; signal?: AbortSignal } = {},
): Promise<Core> {
  const clock = opts.clock ?? (() => new Date());
  const log = opts.log ?? createLogger(config.LOG_LEVEL, opts.logStream);
  let t = performance.now();
  log.info(
    {
      phase: 'begin',
      // Since the process started: Node's own start and the modules loaded so far.
      ms: Math.round(t),
      database: config.DATABASE_URL ? 'postgres' : 'pglite',
      data_dir: config.DATA_DIR,
      as_of: config.AS_OF ?? 'newest',
    },
    `start-up: process up and modules loaded in ${Math.round(t)} ms; opening the database, then loading the dataset and computing every series`,
  );
  // The bundled dataset's fingerprint is read while the database opens: after PGlite's open its
  // file reads wait behind the WebAssembly compilation on the background threads (~250-400 ms
  // on 2 cores; 30 ms before the open). docs/benchmarks.md, "Start-up".
  const dataset = new DatasetProvider(config.DATA_DIR);
  const fingerprint = dataset.fingerprint();
  fingerprint.catch(() => {}); // awaited below; a failed open must not leave it unhandled
  const database = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    pgliteDir: config.PGLITE_DIR,
    timeouts: {
      connect: config.DB_CONNECT_TIMEOUT_MS,
      query: config.DB_QUERY_TIMEOUT_MS,
      statement: config.DB_STATEMENT_TIMEOUT_MS,
      lock: config.DB_LOCK_TIMEOUT_MS,
      idleInTransaction: config.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
  });
  t = logPhase(
    log,
    'database',
    database.created === 'existing'
      ? 'database opened and migrated'
      : `new embedded database ${database.created === 'template' ? "loaded from the build's template" : 'initialised (initdb: no template, run npm run build)'} and migrated`,
    t,
    { database: database.kind, created: database.created },
  );
  let redis: Redis | null = null;
  let usage: UsageTracker | null = null;
  // The market data cache write the start-up's load began (a local file), awaited before the
  // database closes, on a failed or stopped start-up too: it never rejects.
  let cacheWritten = (): Promise<void> => Promise.resolve();
  try {
    await stopPoint(opts.signal);
    if (config.LIVE && config.AS_OF)
      throw new ConfigError(`AS_OF=${config.AS_OF} pins the served day, but LIVE=1 serves the newest data: unset one of them`);
    // An AS_OF past the data is refused now, not after the import (seconds on a new database).
    if (config.AS_OF) await checkAsOfBeforeImport(config.AS_OF, dataset, new MarketRepo(database.jobs));
    const history = new HistoryRepo(database.db);
    // The bundled dataset seeds the market-data store (once per version of its files); the
    // engine then reads from the store, which the live ingest extends.
    const imported = await importBundledDataset(
      { fingerprint: () => fingerprint, exportSeries: () => dataset.exportSeries() },
      new MarketRepo(database.jobs),
    );
    t = logPhase(log, 'import', imported.skipped ? 'bundled dataset already in the store' : 'bundled dataset imported into the store', t, {
      rows: imported.inserted,
      series: imported.series,
    });
    await stopPoint(opts.signal);
    // The embedded database keeps a copy of the market data next to its folder, valid while
    // the store's revision is unchanged (store/market-cache.ts): a restart reads one file.
    // Start-up only: the live ingest's reloads follow writes, which are misses anyway.
    const stored = new StoredMarketProvider(new MarketRepo(database.jobs));
    const startLoad = database.folder
      ? new StoredMarketProvider(new MarketRepo(database.jobs), {
          cache: new MarketCache<StoredMarket>(pgliteSibling(database.folder, '.market-cache')),
          onWriteError: (e: unknown) =>
            log.warn({ err: loggableError(e) }, 'market data cache not written; the next start reads the store'),
        })
      : stored;
    cacheWritten = () => startLoad.written;
    // Timed apart from the series computation that follows it inside MarketService.create.
    const timedDataset: MarketDataProvider = {
      name: startLoad.name,
      load: async (asOf?: string) => {
        const data = await startLoad.load(asOf);
        t = logPhase(
          log,
          'dataset',
          startLoad.lastFrom === 'cache'
            ? "market data loaded from the cache of the store's revision"
            : 'market data loaded from the store',
          t,
          { as_of: data.asOf, assets: data.assets.length, from: startLoad.lastFrom },
        );
        return data;
      },
    };
    const market = await MarketService.create(
      timedDataset,
      history,
      config.AS_OF,
      config.LIVE ? { mode: 'live', referenceDay: () => newestCompleteDay(clock()) } : { mode: 'offline' },
    );
    t = logPhase(log, 'series', 'signal, regime and chain-health series computed', t, { series: market.signalSeries.size });
    await stopPoint(opts.signal);
    const repos = {
      users: new UserRepo(database.db),
      keys: new KeyRepo(database.db, database.kind),
      theses: new ThesisRepo(database.db),
      history,
    };
    const usageFlushOutage = new OutageLog(60_000);
    usage = new UsageTracker(
      repos.keys,
      config.USAGE_FLUSH_MS,
      // During a database outage every flush fails: the first is logged, then one line a minute with the count.
      (e) => usageFlushOutage.error(log, loggableError(e), 'usage flush failed; will retry'),
      config.USAGE_FLUSH_CHUNK,
      config.USAGE_FLUSH_SHARE,
    );
    // ioredis and jose are loaded only when configured (start-up time).
    redis = config.REDIS_URL
      ? connectRedis((await import('ioredis')).Redis, config.REDIS_URL, log, {
          commandTimeout: config.REDIS_COMMAND_TIMEOUT_MS,
          connectTimeout: config.REDIS_CONNECT_TIMEOUT_MS,
          keyPrefix: config.REDIS_KEY_PREFIX,
        })
      : null;
    const limiter = new TierRateLimiter(redis);
    // Key cache: on PGlite this process sees every change; on PostgreSQL the others' revocations
    // and plan changes arrive as notices (and with Redis as markers checked per request).
    let noticesLost = false;
    const notices =
      database.kind === 'postgres'
        ? new KeyNotices(
            database.coordination,
            limiter,
            (err, what) => log.warn({ err: loggableError(err) }, `key-cache invalidation: ${what} failed`),
            (subscribed) => {
              // The first subscription is the start-up's; after that, each loss and each return.
              if (!subscribed)
                log.warn(
                  'key-cache notices lost (PostgreSQL LISTEN connection): the key cache is not used and every API key is looked up until they are back (retried in the background)',
                );
              else if (noticesLost) log.info('key-cache notices back (PostgreSQL LISTEN): the key cache is used again');
              noticesLost ||= !subscribed;
            },
          )
        : null;
    const keys = new KeyService(repos.keys, repos.users, usage, {
      cacheMax: config.KEY_CACHE_MAX,
      trusted: notices === null,
      invalidation: notices ?? undefined,
    });
    await notices?.subscribe(keys).catch((err: unknown) => {
      noticesLost = true;
      log.warn({ err: loggableError(err) }, 'key-cache notices unavailable: every API key is looked up until they are back');
    });
    const theses = new ThesisService(repos.theses, repos.users, market);
    const access = new Access({
      keys,
      limiter,
      usage,
      userTier: (id) => repos.users.userTier(id),
      jwt: config.AUTH_ISSUER
        ? (await import('./auth/jwt.ts')).createJwtVerifier({ issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE })
        : null,
    });
    usage.start();
    const u = usage;
    const r = redis;
    let schedule: IngestSchedule | null = null;
    let stopped: Promise<void> | undefined;
    // The live adapters, the scheduler and their libraries are loaded only in live mode.
    const live = config.LIVE
      ? await Promise.all([import('./jobs/ingest.ts'), import('./providers/live/index.ts')]).then(([job, providers]) => ({
          job,
          providers,
        }))
      : null;
    const ingestDeps = live
      ? {
          sources: live.providers.createLiveSources({
            baseUrls: upstreamUrls(config),
            timeoutMs: config.INGEST_TIMEOUT_MS,
            retries: config.INGEST_RETRIES,
            hostBudgetPerMinute: config.INGEST_HOST_BUDGET_PER_MINUTE,
          }),
          repo: new MarketRepo(database.jobs),
          history: new HistoryRepo(database.jobs),
          market,
          provider: stored,
          coordination: database.coordination,
          log,
          startAfter: await dataset.latestDate(),
          today: () => clock().toISOString().slice(0, 10),
          // One series' fetch, retries and budget waits included.
          fetchTimeoutMs: config.INGEST_TIMEOUT_MS * (config.INGEST_RETRIES + 2) + 60_000,
        }
      : null;
    return {
      config,
      log,
      database,
      repos,
      market,
      keys,
      theses,
      usage: u,
      limiter,
      access,
      redis: r,
      ingest:
        live && ingestDeps
          ? {
              start() {
                schedule ??= live.job.scheduleIngest(ingestDeps);
              },
              once: () => live.job.ingestRound(ingestDeps),
            }
          : null,
      stop() {
        stopped ??= (async () => {
          await schedule?.stop();
          await u.stop();
          r?.disconnect();
          await cacheWritten();
          await database.close();
        })();
        return stopped;
      },
    };
  } catch (err) {
    await usage?.stop().catch(() => {});
    redis?.disconnect();
    await cacheWritten();
    await database.close().catch(() => {});
    throw err;
  }
}

/** The upstream base URLs set in the configuration (UPSTREAM_*_URL); the others keep their public defaults. */
function upstreamUrls(config: Config): Partial<Record<UpstreamName, string>> {
  const urls: Partial<Record<UpstreamName, string | undefined>> = {
    binance: config.UPSTREAM_BINANCE_URL,
    binanceFutures: config.UPSTREAM_BINANCE_FUTURES_URL,
    okx: config.UPSTREAM_OKX_URL,
    hyperliquid: config.UPSTREAM_HYPERLIQUID_URL,
    alternativeMe: config.UPSTREAM_ALTERNATIVE_ME_URL,
    defillama: config.UPSTREAM_DEFILLAMA_URL,
    growthepie: config.UPSTREAM_GROWTHEPIE_URL,
    hyperliquidStats: config.UPSTREAM_HYPERLIQUID_STATS_URL,
    solanaRpc: config.UPSTREAM_SOLANA_RPC_URL,
  };
  return Object.fromEntries(Object.entries(urls).filter(([, v]) => v)) as Partial<Record<UpstreamName, string>>;
}

/**
 * Runs the signal-history backfill job on the core (skipped per asset when already done) and
 * warms the answer cache, logging what it did.
 */
export async function prepareCore(core: Core): Promise<BackfillResult[]> {
  const t0 = performance.now();
  // On the jobs connection: the backfill's transactions may take longer than a request's query.
  const result = await runBackfill(core.market, new HistoryRepo(core.database.jobs));
  const t1 = logPhase(core.log, 'backfill', 'signal history backfill', t0, {
    inserted: result.reduce((s, r) => s + r.inserted, 0),
    skipped: result.filter((r) => r.skipped).length,
    // Changes stored without a level_rule (before migration 0008): filled now, or left null
    // where the recomputed change differs (runBackfill); said by the run that looked for them.
    // Once every asset's fill is done for the engine version, runs do not look again.
    ...(result.some((r) => r.level_rule_checked)
      ? {
          level_rule_filled: result.reduce((s, r) => s + r.level_rule_filled, 0),
          level_rule_left_null: result.reduce((s, r) => s + r.level_rule_left_null, 0),
        }
      : { level_rule_fill: 'done before' }),
  });
  core.market.warm();
  logPhase(core.log, 'warm', 'answer cache warmed', t1);
  return result;
}
