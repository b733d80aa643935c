import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { createService, type Service } from '../../src/server.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, REDIS_SKIP, REDIS_URL, redisAvailable, testConfig } from '../helpers/env.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';

describe('two instances sharing PostgreSQL and Redis', () => {
  let skip: string | null = null;
  let idp: TestIdp;
  let a: Service;
  let b: Service;
  let urlA = '';
  let urlB = '';
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
    const cfg = testConfig({ DATABASE_URL: tmp.url, REDIS_URL, AUTH_ISSUER: idp.issuer });
    // Both start at once, as a deployment would: migrations and backfill must not collide.
    [a, b] = await Promise.all([createService(cfg), createService(cfg)]);
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

  test('100 concurrent requests with one free key let exactly 10 through in the minute window', async (t) => {
    if (skip) return t.skip(skip);
    const jwt = await idp.token('multi-user-1');
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

  test('a key revoked on one instance is refused on the other at once', async (t) => {
    if (skip) return t.skip(skip);
    const jwt = await idp.token('multi-user-2');
    const k = await createKey(urlA, jwt);
    assert.equal((await fetch(`${urlB}/api/v1/assets`, { headers: { authorization: `Bearer ${k.key}` } })).status, 200);
    const rv = await fetch(`${urlA}/api/v1/keys/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ key_id: k.id }),
    });
    assert.equal(rv.status, 200);
    const after = await fetch(`${urlB}/api/v1/assets`, { headers: { authorization: `Bearer ${k.key}` } });
    assert.equal(after.status, 401);
  });
});
