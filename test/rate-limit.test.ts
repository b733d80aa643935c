import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { TierRateLimiter, rateLimitHeaders, nextUtcMidnight } from '../src/rate-limit/limiter.ts';
import { rateLimitAddress } from '../src/rate-limit/address.ts';
import { REDIS_KEY_PREFIX, REDIS_SKIP, REDIS_URL, redisAvailable } from './helpers/env.ts';
import { freePort } from './helpers/faults.ts';

describe('TierRateLimiter (memory)', () => {
  test('counts per subject and tier, refuses without consuming, reports the window', async () => {
    const l = new TierRateLimiter(null, `t${Math.random()}`);
    const now = new Date('2025-01-01T12:00:00Z');
    for (let i = 0; i < 10; i++) assert.equal((await l.consume('k1', 'free', now)).allowed, true);
    const d = await l.consume('k1', 'free', now);
    assert.equal(d.allowed, false);
    assert.equal(d.exceeded!.window, 'minute');
    assert.equal(d.remaining, 40);
    assert.equal((await l.peek('k1', 'free', now)).remaining, 40);
    assert.equal((await l.consume('k2', 'free', now)).remaining, 49, 'other subjects are separate');
    const h = rateLimitHeaders(d);
    assert.equal(h['X-RateLimit-Limit'], '50');
    assert.equal(h['X-RateLimit-Reset'], '2025-01-02T00:00:00.000Z');
    assert.ok(Number(h['Retry-After']) >= 1);
  });

  test('minute and day both used up: Retry-After is the longest wait (to 00:00 UTC) and the decision names the day', async (t) => {
    // The minute window runs on the clock (rate-limiter-flexible's memory store): mocked here
    // to pass a minute without waiting one.
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'], now: Date.parse('2025-01-01T12:00:00Z') });
    const l = new TierRateLimiter(null, `t${Math.random()}`);
    const at = () => new Date(Date.now());
    const ok = async (n: number) => {
      for (let i = 0; i < n; i++) assert.equal((await l.consume('ip:1', 'unauthenticated', at())).allowed, true);
    };
    await ok(5); // the minute (5) is used up, the day (10) is not
    const minuteOnly = await l.consume('ip:1', 'unauthenticated', at());
    assert.equal(minuteOnly.exceeded!.window, 'minute');
    assert.ok(minuteOnly.exceeded!.retryAfterSec <= 60);
    t.mock.timers.tick(61_000);
    await ok(5); // 10 of 10 today, and 5 of 5 this minute
    const both = await l.consume('ip:1', 'unauthenticated', at());
    const toMidnight = (Date.parse('2025-01-02T00:00:00Z') - Date.now()) / 1000;
    assert.deepEqual(
      { window: both.exceeded!.window, limit: both.exceeded!.limit, retry: both.exceeded!.retryAfterSec },
      { window: 'day', limit: 10, retry: toMidnight },
    );
    assert.equal(rateLimitHeaders(both)['Retry-After'], String(toMidnight));
    assert.equal(both.exceeded!.reset.toISOString(), '2025-01-02T00:00:00.000Z');
    // A minute later only the day is used up: the same wait, one minute less (no 60 then 85902).
    t.mock.timers.tick(60_000);
    const dayOnly = await l.consume('ip:1', 'unauthenticated', at());
    assert.equal(dayOnly.exceeded!.window, 'day');
    assert.equal(dayOnly.exceeded!.retryAfterSec, toMidnight - 60);
  });

  test('the API tier has no daily limit: headers describe the minute window', async () => {
    const l = new TierRateLimiter(null, `t${Math.random()}`);
    const d = await l.consume('k', 'api');
    assert.equal(d.limit, 500);
    assert.equal(d.remaining, 499);
    assert.equal(d.windows.length, 1);
  });

  test("the API tier's X-RateLimit-Reset is its minute window's end: the same on every request of the window and on the 429", async (t) => {
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'], now: Date.parse('2025-01-01T12:00:00.250Z') });
    const l = new TierRateLimiter(null, `t${Math.random()}`);
    const end = '2025-01-01T12:01:00.250Z'; // the window starts at the first request
    const at = () => new Date(Date.now());
    const first = await l.admit({ subject: 'key:api', tier: 'api', now: at() });
    assert.ok(first.kind === 'ok');
    assert.equal(rateLimitHeaders(first.own)['X-RateLimit-Reset'], end);
    for (let i = 1; i < 500; i++) {
      t.mock.timers.tick(37); // 499 × 37 ms = 18.5 s: inside the minute
      const a = await l.admit({ subject: 'key:api', tier: 'api', now: at() });
      assert.ok(a.kind === 'ok' && a.own.allowed);
      assert.equal(rateLimitHeaders(a.own)['X-RateLimit-Reset'], end, `request ${i + 1}`);
    }
    t.mock.timers.tick(400);
    const refused = await l.admit({ subject: 'key:api', tier: 'api', now: at() });
    assert.ok(refused.kind === 'ok' && !refused.own.allowed);
    assert.equal(refused.own.exceeded!.reset.toISOString(), end);
    assert.equal(rateLimitHeaders(refused.own)['X-RateLimit-Reset'], end, 'the header and details.reset agree');
  });

  test('next UTC midnight', () => {
    assert.equal(nextUtcMidnight(new Date('2025-12-31T23:59:59Z')).toISOString(), '2026-01-01T00:00:00.000Z');
  });
});

describe('TierRateLimiter with Redis going away and coming back', () => {
  const procs: ChildProcess[] = [];
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
  });
  const has = spawnSync('redis-server', ['--version']).status === 0;

  function startRedis(port: number): Promise<ChildProcess> {
    const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    procs.push(p);
    return new Promise((resolve) => setTimeout(() => resolve(p), 400));
  }

  /** Resolves when `redis` is ready; rejects (failing the test, not hanging it) after 20 s. */
  function ready(redis: Redis, what: string): Promise<void> {
    if (redis.status === 'ready') return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`private redis-server not ready within 20 s (${what})`)), 20_000);
      redis.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  test('falls back to per-instance memory and recovers', { skip: has ? false : 'SKIPPED: redis-server not installed' }, async () => {
    // A port free now (a random one could be another test's, and redis-server would not start).
    const port = await freePort();
    const server = await startRedis(port);
    const redis = new Redis({ port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
    redis.on('error', () => {});
    await ready(redis, 'first start');
    const l = new TierRateLimiter(redis, 'rt');
    assert.equal((await l.consume('k', 'free')).remaining, 49);
    assert.equal(await redis.exists(`rt:free:d:k:${new Date().toISOString().slice(0, 10)}`), 1, 'counted in Redis');
    server.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    const during = await l.consume('k', 'free');
    assert.equal(during.allowed, true, 'still answers without Redis');
    await startRedis(port); // killed with the others after the suite
    await ready(redis, 'restart');
    const back = await l.consume('k2', 'free');
    assert.equal(back.allowed, true);
    assert.equal(await redis.exists(`rt:free:d:k2:${new Date().toISOString().slice(0, 10)}`), 1, 'counted in Redis again');
    redis.disconnect();
  });
});

/**
 * `admit`: both windows of the caller and the account ceiling, after the failed-auth budget
 * and (Redis) the key guards, in one step: the same assertions in memory and in Redis.
 */
for (const store of ['memory', 'redis'] as const) {
  describe(`TierRateLimiter.admit (${store})`, () => {
    let redis: Redis | null = null;
    let skip: string | null = null;
    const setup = async () => {
      if (store === 'memory' || redis) return;
      if (!(await redisAvailable())) {
        skip = REDIS_SKIP;
        return;
      }
      // This test process's prefix (test/helpers/env.ts): the tier epoch and revocation markers
      // below are not per limiter, and another test run may share this Redis.
      redis = new Redis(REDIS_URL, { keyPrefix: REDIS_KEY_PREFIX, maxRetriesPerRequest: 1 });
      await redis.ping();
    };
    after(() => redis?.disconnect());
    const make = () => {
      const l = new TierRateLimiter(redis, `adm${Math.random()}`);
      return { l, account: l.scaled('acct', 5), fails: l.budget('auth-fail', 3, 60) };
    };

    test('counts the minute, the day and the account in one step; a refusal counts nothing anywhere', async (t) => {
      await setup();
      if (skip) return t.skip(skip);
      const { l, account } = make();
      const now = new Date();
      const req = (subject: string) => ({ subject, tier: 'free' as const, now, account: { limiter: account, subject: 'user:u1' } });
      for (let i = 0; i < 10; i++) {
        const a = await l.admit(req('key:a'));
        assert.ok(a.kind === 'ok' && a.own.allowed && a.account!.allowed);
        if (a.kind === 'ok') assert.equal(a.own.remaining, 50 - i - 1);
      }
      const refused = await l.admit(req('key:a'));
      assert.ok(refused.kind === 'ok' && !refused.own.allowed);
      if (refused.kind === 'ok') {
        assert.equal(refused.own.exceeded!.window, 'minute');
        assert.ok(refused.own.exceeded!.retryAfterSec >= 1 && refused.own.exceeded!.retryAfterSec <= 60);
      }
      // Nothing taken by the refusal: the key's day and the account still count 10.
      assert.equal((await l.peek('key:a', 'free', now)).remaining, 40);
      assert.equal((await account.peek('user:u1', 'free', now)).windows[0]!.remaining, 40);
      // Four more keys of the same user fill the account's minute (50); the next key is refused by the account.
      for (const k of ['b', 'c', 'd', 'e']) for (let i = 0; i < 10; i++) await l.admit(req(`key:${k}`));
      const byAccount = await l.admit(req('key:f'));
      assert.ok(byAccount.kind === 'ok' && byAccount.own.allowed && !byAccount.account!.allowed);
      if (byAccount.kind === 'ok') assert.equal(byAccount.account!.exceeded!.window, 'minute');
      assert.equal((await l.peek('key:f', 'free', now)).remaining, 50, 'the key refused by the account counted nothing');
    });

    test('an address over its failed-auth budget is refused before anything is counted', async (t) => {
      await setup();
      if (skip) return t.skip(skip);
      const { l, fails } = make();
      for (let i = 0; i < 3; i++) assert.equal((await fails.consume('1.2.3.4')).allowed, true);
      const a = await l.admit({ subject: 'key:x', tier: 'pro', failedAuth: { budget: fails, subject: '1.2.3.4' } });
      assert.equal(a.kind, 'blocked');
      if (a.kind === 'blocked') assert.ok(a.retryAfterSec >= 1 && a.retryAfterSec <= 60);
      assert.equal((await l.peek('key:x', 'pro')).remaining, 5000);
      assert.equal((await l.check({ budget: fails, subject: '1.2.3.4' })).kind, 'blocked');
      assert.equal((await l.check({ budget: fails, subject: '5.6.7.8' })).kind, 'ok');
    });

    if (store === 'redis') {
      test('revocation marker and tier epoch refuse a cached key without counting', async (t) => {
        await setup();
        if (skip) return t.skip(skip);
        const { l } = make();
        const keyId = `k-${Math.random()}`;
        const v = await l.check(null);
        assert.equal(v.kind, 'ok');
        const epoch = v.kind === 'ok' ? v.epoch : '';
        const ok = await l.admit({ subject: `key:${keyId}`, tier: 'free', guard: { keyId, epoch } });
        assert.equal(ok.kind, 'ok');
        await l.bumpTierEpoch();
        const stale = await l.admit({ subject: `key:${keyId}`, tier: 'free', guard: { keyId, epoch } });
        assert.equal(stale.kind, 'stale');
        const now = stale.kind === 'stale' ? stale.epoch : '';
        assert.notEqual(now, epoch);
        await l.markRevoked(keyId);
        assert.equal((await l.admit({ subject: `key:${keyId}`, tier: 'free', guard: { keyId, epoch: now } })).kind, 'revoked');
        assert.equal((await l.check(null, { keyId, epoch: now })).kind, 'revoked');
        assert.equal((await l.peek(`key:${keyId}`, 'free')).remaining, 49, 'only the first admission counted');
      });

      test('admissions asked in one turn share one script call, with the outcomes of one call each in order', async (t) => {
        await setup();
        if (skip) return t.skip(skip);
        const client = new Redis(REDIS_URL, { keyPrefix: REDIS_KEY_PREFIX, maxRetriesPerRequest: 1 });
        t.after(() => client.disconnect());
        let scriptCalls = 0;
        const send = client.sendCommand.bind(client);
        client.sendCommand = (cmd) => {
          if (cmd.name === 'evalsha' || cmd.name === 'eval') scriptCalls++;
          return send(cmd);
        };
        await client.ping();
        const l = new TierRateLimiter(client, `batch${Math.random()}`);
        const fails = l.budget('auth-fail', 3, 60);
        for (let i = 0; i < 3; i++) await fails.consume('9.9.9.9');
        const revokedId = `r-${Math.random()}`;
        await l.markRevoked(revokedId);
        const before = scriptCalls;
        // 12 requests of one free key (10 per minute), a revoked key and a blocked address, all in one turn
        // (14 admissions: within one batch).
        const own = Array.from({ length: 12 }, () => l.admit({ subject: 'key:a', tier: 'free' }));
        const revoked = l.admit({ subject: `key:${revokedId}`, tier: 'free', guard: { keyId: revokedId, epoch: '0' } });
        const blocked = l.admit({ subject: 'key:b', tier: 'free', failedAuth: { budget: fails, subject: '9.9.9.9' } });
        const outcomes = await Promise.all(own);
        assert.equal(scriptCalls - before, 1, 'one script call for the 14 admissions');
        assert.deepEqual(
          outcomes.map((a) => (a.kind === 'ok' ? a.own.allowed : a.kind)),
          [...Array<boolean>(10).fill(true), false, false],
        );
        assert.deepEqual(
          outcomes.slice(0, 10).map((a) => (a.kind === 'ok' ? a.own.remaining : -1)),
          [49, 48, 47, 46, 45, 44, 43, 42, 41, 40],
        );
        assert.equal((await revoked).kind, 'revoked');
        assert.equal((await blocked).kind, 'blocked');
        assert.equal((await l.peek('key:b', 'free')).remaining, 50, 'the blocked address counted nothing');
        // A turn with more admissions than a batch holds (16) is sent in calls of at most 16.
        const many = scriptCalls;
        const all = await Promise.all(Array.from({ length: 40 }, (_, i) => l.admit({ subject: `key:m${i}`, tier: 'pro' })));
        assert.equal(scriptCalls - many, 3);
        assert.ok(all.every((a) => a.kind === 'ok' && a.own.allowed && a.own.remaining === 4999));
      });

      test('Redis unreachable: admit counts in memory at once (no wait), without the guards', async () => {
        const down = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
        down.on('error', () => {});
        const l = new TierRateLimiter(down, `down${Math.random()}`);
        const t0 = performance.now();
        const a = l.admit({ subject: 'key:z', tier: 'free', guard: { keyId: 'z', epoch: 'whatever' } });
        assert.ok(!(a instanceof Promise), 'decided synchronously in memory');
        assert.ok(a.kind === 'ok' && a.own.allowed && a.own.remaining === 49);
        // Synchronous (above); the bound only says it did not wait on a connection (a GC pause or a busy CI core must not fail it).
        assert.ok(performance.now() - t0 < 1000);
        down.disconnect();
      });
    }
  });
}

/**
 * REDIS_KEY_PREFIX (src/core.ts gives it to ioredis as `keyPrefix`): instances with the same
 * prefix share counts, budgets and revocation markers; another deployment (or test run) on the
 * same Redis with another prefix sees none of them.
 */
describe('TierRateLimiter on one Redis under two key prefixes', () => {
  test('the same prefix shares the failed-auth budget and revocations; another prefix is apart', async (t) => {
    if (!(await redisAvailable())) return t.skip(REDIS_SKIP);
    const run = Math.random().toString(36).slice(2);
    const client = (keyPrefix: string) => new Redis(REDIS_URL, { keyPrefix, maxRetriesPerRequest: 1 });
    const [a, a2, b, raw] = [client(`dep-a-${run}:`), client(`dep-a-${run}:`), client(`dep-b-${run}:`), client('')];
    t.after(async () => {
      // Nothing of this test stays in the shared Redis.
      const left = [...(await raw.keys(`dep-a-${run}:*`)), ...(await raw.keys(`dep-b-${run}:*`))];
      if (left.length) await raw.del(...left);
      [a, a2, b, raw].forEach((c) => c.disconnect());
    });
    await Promise.all([a, a2, b, raw].map((c) => c.ping()));
    const [la, la2, lb] = [new TierRateLimiter(a), new TierRateLimiter(a2), new TierRateLimiter(b)];
    const budget = (l: TierRateLimiter) => l.budget('auth-fail', 3, 60);
    for (let i = 0; i < 3; i++) assert.ok((await budget(la).consume('ip:10.0.0.1')).allowed);
    assert.equal((await budget(la2).exhausted('ip:10.0.0.1')).exhausted, true, 'same prefix: the budget is shared');
    assert.equal((await budget(lb).exhausted('ip:10.0.0.1')).exhausted, false, 'other prefix: untouched');
    assert.equal(await raw.exists(`dep-a-${run}:rl:budget:auth-fail:ip:10.0.0.1`), 1, 'stored under the prefix');

    const e = (await la.check(null)) as { kind: 'ok'; epoch: string };
    await la.markRevoked('k1');
    const guard = { keyId: 'k1', epoch: e.epoch };
    assert.equal((await la2.admit({ subject: 'key:k1', tier: 'free', guard })).kind, 'revoked', 'same prefix: revoked');
    const eb = (await lb.check(null)) as { kind: 'ok'; epoch: string };
    assert.equal(
      (await lb.admit({ subject: 'key:k1', tier: 'free', guard: { keyId: 'k1', epoch: eb.epoch } })).kind,
      'ok',
      'other prefix: not revoked',
    );
  });
});

test('rateLimitAddress: IPv4 as is, IPv6 by its /64 in one spelling, IPv4-mapped as IPv4', () => {
  const cases: [string, string][] = [
    ['203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    // Another address of the same /64, written with upper case, leading zeros and ::
    ['2001:0DB8:0001:0002::ff', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['::FFFF:192.0.2.1', '192.0.2.1'],
    // An embedded IPv4 tail that is not the mapped form: its groups are past the /64.
    ['64:ff9b:1:2::192.0.2.1', '64:ff9b:1:2::/64'],
    // Not an address: unchanged (e.g. a test's made-up subject).
    ['not-an-ip', 'not-an-ip'],
  ];
  for (const [ip, want] of cases) assert.equal(rateLimitAddress(ip), want, ip);
});
