import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { loadConfig, ROOT_DIR, type Config } from '../../src/config.ts';

/** PostgreSQL server used by the storage tests (override with TEST_PG_URL). */
export const PG_BASE_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

let pgUp: Promise<boolean> | undefined;

/** True when the PostgreSQL server answers; tests that need it skip with a clear message otherwise. */
export function postgresAvailable(): Promise<boolean> {
  pgUp ??= (async () => {
    const c = new pg.Client({ connectionString: PG_BASE_URL, connectionTimeoutMillis: 10_000 });
    try {
      await c.connect();
      await c.end();
      return true;
    } catch {
      return false;
    }
  })();
  return pgUp;
}

/** Message used when a PostgreSQL test is skipped. */
export const PG_SKIP = `SKIPPED: PostgreSQL not reachable at ${PG_BASE_URL} (these tests run in CI)`;

/** Redis server used by the multi-instance tests (override with TEST_REDIS_URL). */
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * The REDIS_KEY_PREFIX of this test process's services (`testConfig`): its own, so that test
 * runs sharing one Redis (two CI runs, a developer's run beside CI) never count into each
 * other's budgets; the instances of one multi-instance test share it, as one deployment does.
 */
export const REDIS_KEY_PREFIX = `test-${process.pid}-${randomBytes(4).toString('hex')}:`;

let redisUp: Promise<boolean> | undefined;

/** True when the Redis server answers; tests that need it skip with a clear message otherwise. */
export function redisAvailable(): Promise<boolean> {
  redisUp ??= (async () => {
    const r = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 10_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await r.connect();
      await r.ping();
      return true;
    } catch {
      return false;
    } finally {
      r.disconnect();
    }
  })();
  return redisUp;
}

/** Message used when a Redis test is skipped. */
export const REDIS_SKIP = `SKIPPED: Redis not reachable at ${REDIS_URL} (these tests run in CI)`;

/**
 * Creates a fresh, empty PostgreSQL database for one test file and returns its URL and a
 * function that drops it.
 */
export async function createTempPgDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: PG_BASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = PG_BASE_URL.replace(/\/[^/]*$/, `/${name}`);
  return {
    url,
    async drop() {
      const c = new pg.Client({ connectionString: PG_BASE_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** A config for tests: in-memory PGlite, silent logs, the bundled dataset. */
export function testConfig(over: Record<string, string> = {}): Config {
  return loadConfig({ PGLITE_DIR: 'memory://', LOG_LEVEL: 'silent', REDIS_KEY_PREFIX, ...over });
}

/** Reads a dataset CSV independently of the service's loader (header -> rows of records). */
export function readCsv(rel: string): Record<string, string>[] {
  const text = readFileSync(path.join(ROOT_DIR, 'data', rel), 'utf8')
    .trim()
    .split('\n');
  const header = text.shift()!.split(',');
  return text.map((l) => Object.fromEntries(l.split(',').map((v, i) => [header[i], v])));
}
