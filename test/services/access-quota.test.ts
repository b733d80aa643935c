import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServiceError } from '../../src/errors.ts';
import {
  Access,
  API_KEY_OR_USER,
  AUTH_FAILURES_PER_MINUTE,
  type Caller,
  DASHBOARD_REQUESTS_PER_MINUTE,
  dashboardPolicy,
  PUBLIC,
} from '../../src/services/access.ts';
import type { KeyService } from '../../src/services/keys.ts';
import type { UsageTracker } from '../../src/services/usage.ts';
import { TierRateLimiter } from '../../src/rate-limit/limiter.ts';

/**
 * `Access.meter` over the memory limiter, with callers made directly (no HTTP, no database):
 * how the caller's own quota and the account ceiling combine into one 429 (README, "Tiers and
 * rate limits": a 429 names the window that ran out and its `Retry-After` is the wait after
 * which a retry can succeed; when both ran out, the longest wait).
 */

const keyCaller = (keyId: string, userId: string): Caller => ({ kind: 'key', tier: 'free', subject: `key:${keyId}`, keyId, userId });

function access(): Access {
  return new Access({
    keys: {} as KeyService,
    limiter: new TierRateLimiter(null, `aq${Math.random()}`),
    usage: { record() {} } as unknown as UsageTracker,
    userTier: async () => 'free',
  });
}

describe('Access.meter: own quota and account ceiling together', () => {
  test("a key's minute and the account's day both used up: the 429 is the account's day, with the wait to 00:00 UTC", async (t) => {
    // rate-limiter-flexible's memory store runs its windows on the clock: mocked to pass minutes.
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'], now: Date.parse('2025-01-01T12:00:00Z') });
    const a = access();
    const served = async (c: Caller, n: number) => {
      for (let i = 0; i < n; i++) {
        const m = await a.meter(c, API_KEY_OR_USER);
        assert.equal(m.error, null, `request ${i + 1} of ${c.subject}: ${m.error?.message}`);
      }
    };
    // The free account ceiling is 250 a UTC day (5 × 50). Four keys use their whole day (200),
    // ten requests a minute; a fifth key 40 more.
    for (const k of ['k1', 'k2', 'k3', 'k4']) {
      for (let minute = 0; minute < 5; minute++) {
        await served(keyCaller(k, 'u1'), 10);
        t.mock.timers.tick(61_000);
      }
    }
    for (let minute = 0; minute < 4; minute++) {
      await served(keyCaller('k5', 'u1'), 10);
      t.mock.timers.tick(61_000);
    }
    // A new key (k1 revoked, k6 created) makes the account's 250th request of the day at its
    // own 10th of the minute: both its minute and the account's day are used up now.
    const k6 = keyCaller('k6', 'u1');
    await served(k6, 10);
    const m = await a.meter(k6, API_KEY_OR_USER);
    assert.equal(m.error?.code, 'RATE_LIMITED');
    const toMidnight = (Date.parse('2025-01-02T00:00:00Z') - Date.now()) / 1000;
    assert.deepEqual(
      {
        window: m.error!.details!.window,
        limit: m.error!.details!.limit,
        scope: m.error!.details!.scope,
        retry: m.error!.details!.retry_after,
      },
      { window: 'day', limit: 250, scope: 'account', retry: toMidnight },
      'the wait after which a retry can succeed is the account day, not the key minute',
    );
    assert.equal(m.limits.exceeded!.retryAfterSec, toMidnight);
    // Waiting out the key's minute indeed does not help: still refused by the account's day.
    t.mock.timers.tick(61_000);
    const again = await a.meter(k6, API_KEY_OR_USER);
    assert.equal(again.error?.details?.scope, 'account');
    assert.equal(again.error?.details?.window, 'day');
  });

  test('only the key is used up: the 429 is the key with its own window', async () => {
    const a = access();
    const k = keyCaller('solo', 'u2');
    for (let i = 0; i < 10; i++) assert.equal((await a.meter(k, API_KEY_OR_USER)).error, null);
    const m = await a.meter(k, API_KEY_OR_USER);
    assert.equal(m.error?.details?.scope, 'key');
    assert.equal(m.error?.details?.window, 'minute');
    assert.ok(Number(m.error?.details?.retry_after) <= 60);
  });
});

describe('Access.meter: per-minute budgets (dashboard, key management)', () => {
  test("the dashboard budget's reset is its window's end: the same on every request and on the 429", async (t) => {
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'], now: Date.parse('2025-01-01T12:00:00.250Z') });
    const a = access();
    const anon: Caller = { kind: 'anonymous', tier: 'unauthenticated', subject: 'ip:10.0.0.1' };
    const policy = dashboardPolicy(PUBLIC);
    const end = '2025-01-01T12:01:00.250Z'; // the window starts at the first request
    for (let i = 0; i < DASHBOARD_REQUESTS_PER_MINUTE; i++) {
      const m = await a.meter(anon, policy, '10.0.0.1');
      assert.equal(m.error, null);
      assert.equal(m.limits.reset.toISOString(), end, `request ${i + 1}`);
      t.mock.timers.tick(137);
    }
    const refused = await a.meter(anon, policy, '10.0.0.1');
    assert.equal(refused.error?.code, 'RATE_LIMITED');
    assert.equal(refused.error?.details?.reset, end);
    assert.equal(refused.limits.reset.toISOString(), end, 'X-RateLimit-Reset and details.reset agree');
  });
});

describe('Access.authenticate: the failed-authentication budget', () => {
  test("its 429's details.reset is the minute's end (first counted failure + 60 s), the same on every refused request", async (t) => {
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'], now: Date.parse('2025-01-01T12:00:00.250Z') });
    const a = new Access({
      keys: {
        cached: () => undefined,
        authenticate: async () => {
          throw new ServiceError('UNAUTHORIZED', 'no such key', { reason: 'unknown' });
        },
      } as unknown as KeyService,
      limiter: new TierRateLimiter(null, `af${Math.random()}`),
      usage: { record() {} } as unknown as UsageTracker,
      userTier: async () => 'free',
    });
    const header = `Bearer svc_live_${'a'.repeat(38)}`;
    const end = '2025-01-01T12:01:00.250Z';
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) {
      const r = await a.authenticate(header, PUBLIC, '10.0.0.2');
      assert.ok(!r.ok && r.error.code === 'UNAUTHORIZED', `failure ${i + 1}`);
      t.mock.timers.tick(137);
    }
    for (let i = 0; i < 3; i++) {
      const r = await a.authenticate(header, PUBLIC, '10.0.0.2');
      assert.ok(!r.ok && r.error.code === 'RATE_LIMITED');
      assert.equal(r.error.details?.reset, end, `refusal ${i + 1}`);
      t.mock.timers.tick(311);
    }
  });
});
