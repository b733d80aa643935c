import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { createService, type Service } from '../../src/server.ts';
import { generateKey } from '../../src/auth/api-keys.ts';
import { AUTH_FAILURES_PER_MINUTE } from '../../src/services/access.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, REDIS_SKIP, REDIS_URL, redisAvailable, testConfig } from '../helpers/env.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';

/**
 * The keyed hot path (docs/architecture.md, "Access"): a cached key costs no database query
 * and one Redis round trip (both windows, the account ceiling, the failed-auth budget and
 * the revocation marker in one script); an address over its failed-auth budget gets 429 with
 * a cached key too; unknown keys never enter the cache.
 */
describe('key cache and one Redis round trip per keyed request (PostgreSQL + Redis)', () => {
  let skip: string | null = null;
  let idp: TestIdp;
  let svc: Service;
  let url = '';
  let drop: (() => Promise<void>) | undefined;

  before(async () => {
    if (!(await postgresAvailable())) {
      skip = PG_SKIP;
      return;
    }
    if (!(await redisAvailable())) {
      skip = REDIS_SKIP;
      return;
    }
    idp = await startTestIdp();
    const tmp = await createTempPgDatabase();
    drop = tmp.drop;
    svc = await createService(testConfig({ DATABASE_URL: tmp.url, REDIS_URL, AUTH_ISSUER: idp.issuer, TRUST_PROXY: '127.0.0.1' }));
    await svc.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(svc.app.server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await svc?.stop();
    await idp?.close();
    await drop?.();
  });

  async function newKey(sub: string) {
    const r = await fetch(`${url}/api/v1/keys/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await idp.token(sub)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(r.status, 201);
    return ((await r.json()) as { data: { id: string; key: string } }).data;
  }

  /** Counts, while `fn` runs, the service's Redis commands (the liveness PING aside) and its key look-ups. */
  async function counting<T>(fn: () => Promise<T>): Promise<{ out: T; redis: string[]; lookups: number }> {
    const redis: string[] = [];
    let lookups = 0;
    const client = svc.redis!;
    const send = client.sendCommand.bind(client);
    const find = svc.repos.keys.findKey.bind(svc.repos.keys);
    client.sendCommand = ((cmd: { name: string }, ...rest: unknown[]) => {
      if (cmd.name !== 'ping') redis.push(cmd.name);
      return (send as (...a: unknown[]) => unknown)(cmd, ...rest);
    }) as typeof client.sendCommand;
    svc.repos.keys.findKey = (hash: string) => {
      lookups++;
      return find(hash);
    };
    try {
      return { out: await fn(), redis, lookups };
    } finally {
      client.sendCommand = send;
      svc.repos.keys.findKey = find;
    }
  }

  const get = (key: string, from: string) =>
    fetch(`${url}/api/v1/signals`, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': from } });

  test('a cached key: no database query and one Redis command per request, headers unchanged', async (t) => {
    if (skip) return t.skip(skip);
    const k = await newKey('cache-user-1');
    const first = await counting(async () => (await get(k.key, '10.9.0.1')).status);
    assert.equal(first.out, 200);
    assert.equal(first.lookups, 1, 'the first request looks the key up');
    for (let i = 0; i < 5; i++) {
      const c = await counting(async () => {
        const r = await get(k.key, '10.9.0.1');
        await r.arrayBuffer();
        return r;
      });
      assert.equal(c.out.status, 200);
      assert.equal(c.lookups, 0, 'served from the key cache');
      assert.deepEqual(c.redis, ['evalsha'], 'one Redis round trip');
      assert.equal(c.out.headers.get('x-ratelimit-remaining'), String(50 - 2 - i));
      assert.equal(c.out.headers.get('x-service-tier'), 'free');
      assert.match(c.out.headers.get('ratelimit-policy') ?? '', /"minute";q=10;w=60, "day";q=50;w=86400/);
    }
  });

  test('an address over its failed-auth budget gets 429 with a cached key, and before any look-up with an uncached one', async (t) => {
    if (skip) return t.skip(skip);
    const cached = await newKey('cache-user-2');
    const uncached = await newKey('cache-user-3');
    const from = '10.9.0.2';
    assert.equal((await get(cached.key, from)).status, 200);
    const bogus = `svc_live_${'x'.repeat(38)}`;
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) assert.equal((await get(bogus, from)).status, 401);
    const hit = await counting(() => get(cached.key, from));
    assert.equal(hit.out.status, 429);
    assert.deepEqual(hit.redis[0], 'evalsha');
    assert.equal(hit.lookups, 0);
    assert.ok(Number(hit.out.headers.get('retry-after')) >= 1);
    const miss = await counting(() => get(uncached.key, from));
    assert.equal(miss.out.status, 429);
    assert.equal(miss.lookups, 0, 'refused before the key was looked up');
    // Another address with the same keys is served.
    assert.equal((await get(cached.key, '10.9.0.3')).status, 200);
  });

  test('unknown keys never enter the cache', async (t) => {
    if (skip) return t.skip(skip);
    const before = svc.keys.cacheSize;
    for (let i = 0; i < 15; i++) {
      // Well-formed keys (valid checksum) that do not exist: looked up, refused, not cached.
      const r = await get(generateKey().key, `10.9.1.${i}`);
      assert.equal(r.status, 401);
    }
    assert.equal(svc.keys.cacheSize, before);
  });
});
