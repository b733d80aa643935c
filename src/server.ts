import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { ConfigError, type Config } from './config.ts';
import { createJwtVerifier } from './auth/jwt.ts';
import { buildApp } from './http/app.ts';
import { loggableError } from './http/errors.ts';
import { hostName } from './mcp/http.ts';
import type { JwtCheck } from './http/guard.ts';
import { DatasetProvider } from './providers/dataset/dataset.ts';
import { TierRateLimiter } from './rate-limit/limiter.ts';
import { KeyService } from './services/keys.ts';
import { MarketService } from './services/market.ts';
import { ThesisService } from './services/theses.ts';
import { UsageTracker } from './services/usage.ts';
import { KeyRepo } from './store/key-repo.ts';
import { openDatabase, type Database } from './store/db.ts';
import { HistoryRepo } from './store/history-repo.ts';
import { ThesisRepo } from './store/thesis-repo.ts';
import { UserRepo } from './store/user-repo.ts';

/** A built service: the app (not listening yet), its parts, and a way to stop everything. */
export interface Service {
  app: FastifyInstance;
  market: MarketService;
  database: Database;
  /** The account repositories (users, API keys, theses). */
  repos: { users: UserRepo; keys: KeyRepo; theses: ThesisRepo };
  keys: KeyService;
  theses: ThesisService;
  usage: UsageTracker;
  limiter: TierRateLimiter;
  redis: Redis | null;
  stop(): Promise<void>;
}

/**
 * The embedded identity provider's secret: AUTH_SECRET, or one generated at first start and
 * kept beside the PGlite database (in memory for `memory://`).
 */
function authSecret(config: Config): string {
  if (config.AUTH_SECRET) return config.AUTH_SECRET;
  if (config.DATABASE_URL) {
    // The JWT signing key and sessions are encrypted with the secret and stored in the shared
    // database: a secret generated per start would orphan them, and instances must agree.
    throw new ConfigError('AUTH_SECRET: required (>= 32 characters) when DATABASE_URL is set and the embedded identity provider is used (AUTH_ISSUER unset)');
  }
  if (config.PGLITE_DIR.startsWith('memory://')) return randomBytes(32).toString('base64url');
  const file = path.join(path.dirname(config.PGLITE_DIR), 'auth-secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(path.dirname(file), { recursive: true });
  const s = randomBytes(32).toString('base64url');
  writeFileSync(file, s, { mode: 0o600 });
  return s;
}

/** Host names /mcp accepts besides loopback: PUBLIC_URL's host and MCP_ALLOWED_HOSTS. */
function mcpAllowedHosts(config: Config, publicUrl: string): string[] {
  const out = (config.MCP_ALLOWED_HOSTS ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean);
  const h = hostName(publicUrl);
  if (h) out.push(h);
  return out;
}

/** Connects ioredis for the rate limiter; failures are logged and the limiter falls back to memory. */
function connectRedis(url: string, log: (msg: string, err?: unknown) => void): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (n) => Math.min(n * 200, 2000),
  });
  let down = false;
  redis.on('error', (err) => {
    if (!down) log('Redis unavailable: rate limits fall back to per-instance memory until it returns', err);
    down = true;
  });
  redis.on('ready', () => {
    if (down) log('Redis is back: rate limits are shared again');
    down = false;
  });
  return redis;
}

/**
 * Builds the whole service from a config: opens and migrates the database (PGlite or
 * PostgreSQL), loads the dataset as of AS_OF and computes every series, backfills the signal
 * history (skipped when already done), sets up identity (embedded, or an external OIDC
 * issuer), API keys, rate limits (memory or Redis) and the HTTP app (not listening).
 */
export async function createService(config: Config, opts: { logStream?: NodeJS.WritableStream; publicUrl?: string } = {}): Promise<Service> {
  const secret = config.AUTH_ISSUER ? null : authSecret(config);
  const database = await openDatabase({ databaseUrl: config.DATABASE_URL, pgliteDir: config.PGLITE_DIR });
  let redis: Redis | null = null;
  let usage: UsageTracker | null = null;
  try {
    const provider = new DatasetProvider(config.DATA_DIR);
    const market = await MarketService.create(provider, new HistoryRepo(database.db), config.AS_OF);
    const repos = { users: new UserRepo(database.db), keys: new KeyRepo(database.db), theses: new ThesisRepo(database.db) };
    let logger: FastifyInstance['log'] | null = null;
    const log = (msg: string, err?: unknown) => (err ? logger?.warn({ err }, msg) : logger?.info(msg));
    usage = new UsageTracker(repos.keys, config.USAGE_FLUSH_MS, (e) => logger?.error({ err: loggableError(e) }, 'usage flush failed; will retry'));
    redis = config.REDIS_URL ? connectRedis(config.REDIS_URL, log) : null;
    const limiter = new TierRateLimiter(redis);
    const keys = new KeyService(repos.keys, repos.users, usage, database.kind === 'pglite');
    const theses = new ThesisService(repos.theses, repos.users, market);

    const publicUrl = (opts.publicUrl ?? config.PUBLIC_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
    let jwt: JwtCheck | null = null;
    if (config.AUTH_ISSUER) {
      jwt = createJwtVerifier({ issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE });
    }
    const app = await buildApp({
      config,
      market,
      database,
      keys,
      theses,
      logStream: opts.logStream,
      mcp: { allowedHosts: mcpAllowedHosts(config, publicUrl) },
      guard: {
        keys,
        get jwt() {
          return jwt;
        },
        limiter,
        usage,
        userTier: (id) => repos.users.userTier(id),
        asOf: market.asOf,
      },
      extra: async (a) => {
        if (!config.AUTH_ISSUER) {
          const { registerIdentityProvider } = await import('./auth/identity.ts');
          const idp = await registerIdentityProvider(a, { db: database.db, baseUrl: publicUrl, secret: secret!, audience: config.AUTH_AUDIENCE });
          jwt = createJwtVerifier({ issuer: idp.issuer, audience: idp.audience, jwks: idp.jwks });
        }
      },
    });
    logger = app.log;
    const t0 = performance.now();
    const result = await market.backfill();
    app.log.info(
      { ms: Math.round(performance.now() - t0), inserted: result.reduce((s, r) => s + r.inserted, 0), skipped: result.filter((r) => r.skipped).length },
      'signal history backfill',
    );
    market.warm();
    usage.start();
    const u = usage;
    const r = redis;
    return {
      app,
      market,
      database,
      repos,
      keys,
      theses,
      usage: u,
      limiter,
      redis: r,
      async stop() {
        await app.close();
        await u.stop();
        r?.disconnect();
        await database.close();
      },
    };
  } catch (err) {
    await usage?.stop().catch(() => {});
    redis?.disconnect();
    await database.close().catch(() => {});
    throw err;
  }
}
