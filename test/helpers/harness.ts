import assert from 'node:assert/strict';
import type { OutgoingHttpHeaders } from 'node:http';
import { cpSync, existsSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { createCore, prepareCore } from '../../src/core.ts';
import { createService, type Service } from '../../src/server.ts';
import type { PlanTier } from '../../src/auth/tiers.ts';
import { ErrorEnvelopeSchema } from '../../src/http/envelope.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, REDIS_SKIP, REDIS_URL, redisAvailable, testConfig } from './env.ts';
import { startTestIdp, type TestIdp } from './idp.ts';

/**
 * The test harness: one running service per test file (createService, src/server.ts) with an
 * external test identity provider (test/helpers/idp.ts), on an in-memory PGlite or a temporary
 * PostgreSQL database, optionally with Redis, listening on 127.0.0.1:0. It seeds what the
 * tests need: JWTs for any user, API keys per tier (created through POST /api/v1/keys/create,
 * as a client would), and calls the API with a fresh client address each time (so the
 * per-address limits of one test do not touch another).
 *
 * Usage (one harness per file):
 *   let h: Harness;
 *   before(async () => (h = await startHarness({ database: 'pglite' })));
 *   after(() => h?.stop());
 */
export interface HarnessOptions {
  /** `pglite` (in memory, default) or `postgres` (a temporary database on PG_BASE_URL, dropped by stop()). */
  database?: 'pglite' | 'postgres';
  /** Use Redis (REDIS_URL) for the rate limiter. */
  redis?: boolean;
  /** Extra configuration (environment-variable names, as loadConfig reads them). */
  config?: Record<string, string>;
  /** Collect the service's log lines in `logs` (set LOG_LEVEL in `config` to see more than errors). */
  captureLogs?: boolean;
  /** Called with the app before it is ready, e.g. to add a test-only route. */
  beforeReady?: (app: FastifyInstance) => void | Promise<void>;
}

export interface HarnessResponse {
  status: number;
  /** Response headers (lower-case names). */
  headers: OutgoingHttpHeaders;
  /** The JSON body (undefined when the body is not JSON). */
  body: any;
  /** The body as text. */
  raw: string;
}

export interface RequestOptions {
  /** Sent as `Authorization: Bearer <token>` (an API key or a JWT). */
  token?: string;
  /** JSON-encoded as the request body. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Client address (default: a fresh one per request). */
  ip?: string;
}

export interface Harness {
  svc: Service;
  app: FastifyInstance;
  idp: TestIdp;
  /** Base URL of the listening server, e.g. http://127.0.0.1:43121. */
  base: string;
  /** Which database the service runs on. */
  database: 'pglite' | 'postgres';
  /** Log lines written by the service (with `captureLogs`). */
  logs: string[];
  /** A JWT of the test IdP for `userId` (email `<userId>@example.com` unless given). */
  jwt(userId: string, email?: string): Promise<string>;
  /** A new API key (id and key) for the user of `jwt`, through POST /api/v1/keys/create. */
  createKey(jwt: string, name?: string): Promise<{ id: string; key: string }>;
  /**
   * A new user with one API key of `tier` (the user's plan set with svc.keys.setTier).
   * `userId` defaults to a fresh one.
   */
  keyFor(tier: PlanTier, userId?: string): Promise<{ key: string; id: string; userId: string; email: string; jwt: string }>;
  /** One call to the API (through Fastify's inject, with the client address `ip`). */
  request(method: string, path: string, opts?: RequestOptions): Promise<HarnessResponse>;
  /** A fresh client address. */
  freshIp(): string;
  /** Stops the service and the IdP; drops the temporary database. */
  stop(): Promise<void>;
}

/** Why a harness with these options cannot run here (a SKIPPED message), or null. */
export async function harnessUnavailable(opts: Pick<HarnessOptions, 'database' | 'redis'> = {}): Promise<string | null> {
  if (opts.database === 'postgres' && !(await postgresAvailable())) return PG_SKIP;
  if (opts.redis && !(await redisAvailable())) return REDIS_SKIP;
  return null;
}

/**
 * Runs `fn` with a harness started with `opts` and stops it afterwards (also when `fn`
 * throws), or skips the test `t` with the SKIPPED message when PostgreSQL or Redis that
 * `opts` asks for is not reachable here (printed too, so that a run's log says so).
 */
export async function withHarness(
  t: { skip(message?: string): void },
  opts: HarnessOptions,
  fn: (h: Harness) => Promise<void>,
): Promise<void> {
  const why = await harnessUnavailable(opts);
  if (why) {
    console.log(why);
    t.skip(why);
    return;
  }
  const h = await startHarness(opts);
  try {
    await fn(h);
  } finally {
    await h.stop();
  }
}

let harnessSeq = 0;

/**
 * A migrated and backfilled PGlite data directory shared by the harnesses of one `npm test`
 * run (scripts/run-tests.mjs sets TEST_HARNESS_CACHE to a directory of its own and removes it
 * at the end): copying it is about four times faster than creating a database in memory,
 * migrating and backfilling it. Whoever finds it missing builds it in a directory of its own
 * and renames it into place (a concurrent builder's copy is discarded). Without
 * TEST_HARNESS_CACHE (a file run on its own) the harness uses an in-memory PGlite.
 */
async function pgliteCopy(cache: string, seq: number): Promise<string> {
  const template = path.join(cache, 'pglite-template');
  if (!existsSync(template)) {
    const building = path.join(cache, `building-${process.pid}-${seq}`);
    const core = await createCore(testConfig({ PGLITE_DIR: building }));
    try {
      await prepareCore(core);
    } finally {
      await core.stop();
    }
    try {
      renameSync(building, template);
      // Its market data cache (store/market-cache.ts) too: a copy of the folder is the same
      // store at the same revision, so the copies start from it.
      if (existsSync(`${building}.market-cache`)) renameSync(`${building}.market-cache`, `${template}.market-cache`);
    } catch {
      rmSync(building, { recursive: true, force: true });
    }
    rmSync(`${building}.market-cache`, { force: true });
  }
  const dir = path.join(cache, `harness-${process.pid}-${seq}`);
  cpSync(template, dir, { recursive: true });
  if (existsSync(`${template}.market-cache`)) cpSync(`${template}.market-cache`, `${dir}.market-cache`);
  return dir;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const database = opts.database ?? 'pglite';
  const why = await harnessUnavailable(opts);
  if (why) throw new Error(why);
  const seq = ++harnessSeq;
  const idp = await startTestIdp();
  let drop: (() => Promise<void>) | undefined;
  let svc: Service | undefined;
  const logs: string[] = [];
  try {
    const env: Record<string, string> = { AUTH_ISSUER: idp.issuer, ...opts.config };
    if (database === 'postgres') {
      const tmp = await createTempPgDatabase();
      drop = tmp.drop;
      env.DATABASE_URL = tmp.url;
    } else if (process.env.TEST_HARNESS_CACHE && !['AS_OF', 'DATA_DIR', 'PGLITE_DIR'].some((k) => k in env)) {
      const dir = await pgliteCopy(process.env.TEST_HARNESS_CACHE, seq);
      env.PGLITE_DIR = dir;
      drop = async () => rmSync(dir, { recursive: true, force: true });
    }
    if (opts.redis) env.REDIS_URL = REDIS_URL;
    const logStream = opts.captureLogs
      ? new Writable({
          write(chunk, _enc, cb) {
            logs.push(chunk.toString());
            cb();
          },
        })
      : undefined;
    svc = await createService(testConfig(env), { logStream });
    await opts.beforeReady?.(svc.app);
    const base = await svc.app.listen({ host: '127.0.0.1', port: 0 });
    const app = svc.app;
    const service = svc;

    let ipSeq = 0;
    const freshIp = () => `10.${100 + (seq % 100)}.${Math.floor(++ipSeq / 250) % 250}.${(ipSeq % 250) + 1}`;
    let userSeq = 0;

    const h: Harness = {
      svc: service,
      app,
      idp,
      base,
      database,
      logs,
      freshIp,
      jwt: (userId, email) => idp.token(userId, { email: email ?? `${userId}@example.com` }),
      async request(method, path, o = {}) {
        const headers: Record<string, string> = {
          ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
          ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...o.headers,
        };
        const res = await app.inject({
          method: method as 'GET',
          url: path,
          remoteAddress: o.ip ?? freshIp(),
          headers,
          payload: o.body === undefined ? undefined : JSON.stringify(o.body),
        });
        let body: any;
        try {
          body = res.json();
        } catch {
          body = undefined;
        }
        return { status: res.statusCode, headers: res.headers, body, raw: res.body };
      },
      async createKey(jwt, name = 'test') {
        const r = await h.request('POST', '/api/v1/keys/create', { token: jwt, body: { name } });
        assert.equal(r.status, 201, r.raw);
        return { id: r.body.data.id as string, key: r.body.data.key as string };
      },
      async keyFor(tier, userId = `h${seq}-${tier}-${++userSeq}`) {
        const email = `${userId}@example.com`;
        const jwt = await h.jwt(userId, email);
        const k = await h.createKey(jwt, tier);
        if (tier !== 'free') assert.equal(await service.keys.setTier(email, tier), 1);
        return { ...k, userId, email, jwt };
      },
      async stop() {
        await service.stop();
        await idp.close();
        await drop?.();
      },
    };
    return h;
  } catch (err) {
    await svc?.stop().catch(() => {});
    await idp.close().catch(() => {});
    await drop?.().catch(() => {});
    throw err;
  }
}

/** Asserts an error response in the envelope: status, `error.code`, `data: null`, `meta.version`. */
export function expectError(r: { status: number; body: any }, status: number, code: string): void {
  assert.equal(r.status, status, JSON.stringify(r.body));
  ErrorEnvelopeSchema.parse(r.body);
  assert.equal(r.body.status, 'error');
  assert.equal(r.body.data, null);
  assert.equal(r.body.error.code, code);
  assert.equal(r.body.meta.version, 'v1');
}

/** The database the per-resource test files run on: TEST_DATABASE (`pglite` or `postgres`), default `pglite`. */
export function testDatabase(): 'pglite' | 'postgres' {
  return process.env.TEST_DATABASE === 'postgres' ? 'postgres' : 'pglite';
}
