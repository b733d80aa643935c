import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createService, type Service } from '../../src/server.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, REDIS_SKIP, REDIS_URL, redisAvailable, testConfig } from '../helpers/env.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';
import pg from 'pg';

const { Client } = pg;

/** Polls `cond` every 250 ms until it holds; fails after 15 s with `what`. */
async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + 15_000;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** How many keys the revocation check revokes, one after the other. */
const REVOCATIONS = 50;

/**
 * Two instances sharing one PostgreSQL database, with Redis (shared limits; revocations also
 * as markers checked with the quota) or without (per-instance limits; revocations as
 * PostgreSQL notices only). Both keep verified keys in their caches.
 */
for (const withRedis of [true, false]) {
  const label = withRedis ? 'PostgreSQL and Redis' : 'PostgreSQL only (no Redis)';
  const tag = withRedis ? 'r' : 'p';
  describe(`two instances sharing ${label}`, () => {
    let skip: string | null = null;
    let idp: TestIdp;
    let a: Service;
    let b: Service;
    let urlA = '';
    let urlB = '';
    let drop: (() => Promise<void>) | undefined;
    let dbUrl = '';
    const bLogs: string[] = [];

    before(async () => {
      if (!(await postgresAvailable())) {
        skip = PG_SKIP;
        return;
      }
      if (withRedis && !(await redisAvailable())) {
        skip = REDIS_SKIP;
        return;
      }
      idp = await startTestIdp();
      const tmp = await createTempPgDatabase();
      drop = tmp.drop;
      dbUrl = tmp.url;
      // TRUST_PROXY: each revocation check comes from its own address (X-Forwarded-For), so
      // that the refusals do not add up to the per-address failed-authentication budget.
      const cfg = testConfig({
        DATABASE_URL: tmp.url,
        AUTH_ISSUER: idp.issuer,
        TRUST_PROXY: '127.0.0.1',
        ...(withRedis ? { REDIS_URL } : {}),
      });
      // Both start at once, as a deployment would: migrations and backfill must not collide.
      // B's log at info level: an operator must see the notice connection's loss and return.
      const bLog = new Writable({
        write(chunk: Buffer, _enc, done) {
          bLogs.push(chunk.toString());
          done();
        },
      });
      [a, b] = await Promise.all([createService(cfg), createService({ ...cfg, LOG_LEVEL: 'info' }, { logStream: bLog })]);
      await a.app.listen({ port: 0, host: '127.0.0.1' });
      await b.app.listen({ port: 0, host: '127.0.0.1' });
      urlA = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
      urlB = `http://127.0.0.1:${(b.app.server.address() as AddressInfo).port}`;
    });
    after(async () => {
      await a?.stop();
      await b?.stop();
      await idp?.close();
      await drop?.();
    });

    async function createKey(base: string, jwt: string) {
      const r = await fetch(`${base}/api/v1/keys/create`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(r.status, 201);
      return ((await r.json()) as { data: { id: string; key: string } }).data;
    }

    async function get(base: string, key: string, from = '10.1.0.1') {
      const r = await fetch(`${base}/api/v1/assets`, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': from } });
      await r.arrayBuffer();
      return r;
    }

    if (withRedis) {
      test('100 concurrent requests with one free key let exactly 10 through in the minute window', async (t) => {
        if (skip) return t.skip(skip);
        const jwt = await idp.token(`multi-${tag}-user-1`);
        const k = await createKey(urlA, jwt);
        const res = await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            fetch(`${i % 2 ? urlA : urlB}/api/v1/signals`, { headers: { authorization: `Bearer ${k.key}` } }),
          ),
        );
        const codes = res.map((r) => r.status);
        await Promise.all(res.map((r) => r.arrayBuffer()));
        assert.equal(codes.filter((c) => c === 200).length, 10, codes.join(','));
        assert.equal(codes.filter((c) => c === 429).length, 90);
        const last = res.find((r) => r.status === 429)!;
        assert.ok(Number(last.headers.get('retry-after')) >= 1);
        assert.equal(last.headers.get('x-service-tier'), 'free');
      });
    }

    test(`${REVOCATIONS} keys revoked on one instance, one after the other: each refused on the very next request on the other`, async (t) => {
      if (skip) return t.skip(skip);
      // 10 users with 5 keys each: within the per-user key-management budget and the account ceiling.
      const jwts = await Promise.all(Array.from({ length: REVOCATIONS / 5 }, (_, u) => idp.token(`multi-${tag}-revoker-${u}`)));
      const refused: number[] = [];
      for (let i = 0; i < REVOCATIONS; i++) {
        const jwt = jwts[i % jwts.length]!;
        const k = await createKey(urlA, jwt);
        const from = `10.2.${Math.floor(i / 200)}.${i % 200}`;
        // Twice on B: the first looks the key up and caches it, the second is served from the cache.
        assert.equal((await get(urlB, k.key, from)).status, 200);
        assert.equal((await get(urlB, k.key, from)).status, 200);
        assert.equal(b.keys.cached(k.key)?.caller.keyId, k.id, 'B serves the key from its cache');
        const rv = await fetch(`${urlA}/api/v1/keys/revoke`, {
          method: 'POST',
          headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
          body: JSON.stringify({ key_id: k.id }),
        });
        assert.equal(rv.status, 200);
        await rv.arrayBuffer();
        const next = await get(urlB, k.key, from);
        if (next.status === 401) refused.push(i);
        else assert.fail(`revocation ${i + 1}: the next request on the other instance got ${next.status}, not 401`);
      }
      assert.equal(refused.length, REVOCATIONS);
    });

    test('a plan change on one instance is the tier of the next request on the other', async (t) => {
      if (skip) return t.skip(skip);
      const sub = `multi-${tag}-tier-user`;
      const jwt = await idp.token(sub);
      const k = await createKey(urlA, jwt);
      assert.equal((await get(urlB, k.key)).headers.get('x-service-tier'), 'free');
      for (const tier of ['pro', 'api', 'free', 'pro'] as const) {
        assert.equal(await a.keys.setTier(`${sub}@example.com`, tier), 1);
        assert.equal((await get(urlB, k.key)).headers.get('x-service-tier'), tier);
      }
    });

    test('an instance that loses its notice connection stops using its cache until it has subscribed again', async (t) => {
      if (skip) return t.skip(skip);
      const sub = `multi-${tag}-reconnect-user`;
      const jwt = await idp.token(sub);
      const k = await createKey(urlA, jwt);
      assert.equal((await get(urlB, k.key)).status, 200);
      assert.ok(b.keys.cached(k.key), 'cached on B');
      // Ends every instance's coordination session (the holders of the presence lock), as a
      // database restart or a network cut would.
      const pg = new Client({ connectionString: dbUrl });
      await pg.connect();
      try {
        const r = await pg.query(
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 727303
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        assert.ok(r.rows[0].n >= 2);
      } finally {
        await pg.end();
      }
      await until(() => b.keys.cached(k.key) === undefined, 'B drops its cache when the connection is lost');
      await until(() => bLogs.some((l) => l.includes('key-cache notices lost')), 'B logs the loss');
      // While unsubscribed B looks keys up (not cached); once back it caches again. (Any
      // status: the free key's 10 per minute may run out while polling; it is verified all the same.)
      await until(
        async () => (await get(urlB, k.key)).status > 0 && b.keys.cached(k.key) !== undefined,
        'B caches again once re-subscribed',
      );
      await until(() => bLogs.some((l) => l.includes('key-cache notices back')), 'B logs the return');
      assert.equal(bLogs.filter((l) => l.includes('key-cache notices lost')).length, 1, 'one line per loss, not one per retry');
      const rv = await fetch(`${urlA}/api/v1/keys/revoke`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ key_id: k.id }),
      });
      assert.equal(rv.status, 200);
      assert.equal((await get(urlB, k.key)).status, 401);
    });

    if (withRedis) {
      test('with Redis the marker alone refuses a cached key (no notice sent): revocation and plan change', async (t) => {
        if (skip) return t.skip(skip);
        const sub = `multi-${tag}-marker-user`;
        const jwt = await idp.token(sub);
        const k = await createKey(urlA, jwt);
        const k2 = await createKey(urlA, jwt);
        for (const key of [k.key, k2.key]) {
          assert.equal((await get(urlB, key)).status, 200);
          assert.ok(b.keys.cached(key), 'cached on B');
        }
        // Written straight to the database, as another tool would, plus the Redis marker / epoch: no NOTIFY.
        await a.repos.users.setTierByEmail(`${sub}@example.com`, 'pro');
        await a.limiter.bumpTierEpoch();
        assert.ok(b.keys.cached(k2.key), 'still cached on B: only the epoch moved');
        assert.equal((await get(urlB, k2.key)).headers.get('x-service-tier'), 'pro');
        await a.repos.keys.revokeKey(sub, k.id);
        await a.limiter.markRevoked(k.id);
        assert.ok(b.keys.cached(k.key), 'still cached on B: only the marker says revoked');
        const r = await get(urlB, k.key);
        assert.equal(r.status, 401);
        assert.equal((await fetch(`${urlB}/api/v1/assets`, { headers: { authorization: `Bearer ${k.key}` } })).status, 401);
        assert.equal(b.keys.cached(k.key), undefined, 'evicted on B');
      });
    }
  });
}
