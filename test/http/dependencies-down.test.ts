import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createService } from '../../src/server.ts';
import { startTestIdp } from '../helpers/idp.ts';
import { Redis } from 'ioredis';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';
import { privateServerUnavailable, startPrivateRedis } from '../helpers/faults.ts';

describe('a dependency that goes away is 503 SERVICE_UNAVAILABLE, never 500', async () => {
  const pgUp = await postgresAvailable();

  test('the database is dropped under a running service', { skip: pgUp ? false : PG_SKIP }, async () => {
    const db = await createTempPgDatabase();
    const idp = await startTestIdp();
    const lines: string[] = [];
    const logStream = new Writable({
      write: (c, _e, cb) => {
        lines.push(c.toString());
        cb();
      },
    });
    const svc = await createService(testConfig({ DATABASE_URL: db.url, AUTH_ISSUER: idp.issuer, LOG_LEVEL: 'info' }), { logStream });
    try {
      await svc.app.ready();
      const jwt = await idp.token('down-user', { email: 'down@example.com' });
      const k = await svc.app.inject({
        method: 'POST',
        url: '/api/v1/keys/create',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        payload: '{}',
      });
      assert.equal(k.statusCode, 201);
      const key: string = k.json().data.key;
      await db.drop();
      for (const [url, token] of [
        ['/api/v1/assets', key],
        ['/api/v1/keys', jwt],
      ] as const) {
        const r = await svc.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
        assert.equal(r.statusCode, 503, `${url}: ${r.body}`);
        assert.equal(r.json().error.code, 'SERVICE_UNAVAILABLE');
        assert.doesNotMatch(r.body, /ECONN|database ".*" does not exist|select|params/i);
        assert.ok(r.headers['x-ratelimit-limit'] && r.headers['x-service-tier'], 'rate-limit headers on the 503');
        // A passing failure says when to try again, in the header and in the envelope (README, "Errors").
        assert.equal(r.headers['retry-after'], '5', `${url}: Retry-After`);
        assert.equal(r.json().error.details.retry_after, 5);
      }
      // Public data needs no database: without a key it is still served.
      assert.equal((await svc.app.inject({ method: 'GET', url: '/api/v1/regime' })).statusCode, 200);
      // The log says what happened without the query parameters (key digests, user ids).
      const log = lines.join('');
      assert.match(log, /dependency unavailable/);
      // Two 503s a moment apart: one error line for the outage, not one per request (errors.ts, OutageLog).
      assert.equal(lines.filter((l) => l.includes('dependency unavailable')).length, 1, log);
      assert.doesNotMatch(log, /params:/);
      // The usage flush fails on every attempt while the database is gone: one line, not one per flush.
      const keyId = k.json().data.id as string;
      for (let i = 0; i < 3; i++) {
        svc.usage.record(keyId);
        await svc.usage.flush();
      }
      assert.equal(lines.filter((l) => l.includes('usage flush failed')).length, 1, lines.join(''));
      assert.equal(svc.usage.pending(keyId, new Date().toISOString().slice(0, 10)).requests, 3, 'the counts are kept for the next flush');
    } finally {
      await svc.stop().catch(() => {});
      await idp.close();
    }
  });

  test('the identity provider cannot be reached: 503, and no failed-authentication count', async () => {
    const idp = await startTestIdp();
    const jwt = await idp.token('idp-down-user');
    await idp.close();
    const svc = await createService(testConfig({ AUTH_ISSUER: idp.issuer }));
    try {
      await svc.app.ready();
      for (let i = 0; i < 25; i++) {
        const r = await svc.app.inject({
          method: 'GET',
          url: '/api/v1/keys',
          headers: { authorization: `Bearer ${jwt}` },
          remoteAddress: '10.77.0.1',
        });
        assert.equal(r.statusCode, 503, r.body);
        assert.equal(r.json().error.code, 'SERVICE_UNAVAILABLE');
        assert.ok(r.headers['x-ratelimit-limit'], 'rate-limit headers on the 503');
        assert.equal(r.headers['retry-after'], '5');
        assert.equal(r.json().error.details.retry_after, 5);
      }
    } finally {
      await svc.stop();
    }
  });

  const noRedis = privateServerUnavailable('redis');
  test(
    'a Redis that refuses the password: the service starts on memory limits, and the password is not logged',
    { skip: noRedis ?? false },
    async () => {
      const redis = await startPrivateRedis();
      const lines: string[] = [];
      const logStream = new Writable({
        write: (c, _e, cb) => {
          lines.push(c.toString());
          cb();
        },
      });
      let svc: Awaited<ReturnType<typeof createService>> | undefined;
      try {
        const admin = new Redis(redis.url);
        await admin.config('SET', 'requirepass', 'the-right-one');
        admin.disconnect();
        const wrong = 'wrong-pw-3f9a1c';
        svc = await createService(testConfig({ REDIS_URL: redis.url.replace('redis://', `redis://:${wrong}@`), LOG_LEVEL: 'info' }), {
          logStream,
        });
        await svc.app.ready();
        const deadline = Date.now() + 10_000;
        while (!lines.some((l) => l.includes('Redis unavailable'))) {
          assert.ok(Date.now() < deadline, 'no Redis warning logged');
          await new Promise((r) => setTimeout(r, 50));
        }
        const warning = lines.find((l) => l.includes('Redis unavailable'))!;
        // ioredis's error carries the AUTH command and its arguments: those are redacted. (On a
        // loaded machine the first error logged can be a connection timeout, without a command.)
        if (warning.includes('"command"')) assert.match(warning, /"args":"\[redacted\]"/);
        assert.ok(!lines.some((l) => l.includes(wrong)), 'the password appears in the log');
        const r = await svc.app.inject({ method: 'GET', url: '/api/v1/assets' });
        assert.equal(r.statusCode, 200);
      } finally {
        await svc?.stop();
        await redis.stop();
      }
    },
  );
});
