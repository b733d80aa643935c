import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { TIER_LIMITS, type Tier } from '../auth/tiers.ts';
import { isoFormatter } from '../engine/util.ts';

/** Which window a decision is about. */
export type Window = 'minute' | 'day';

/**
 * The outcome of counting one request. `limit`/`remaining`/`reset` describe the daily window
 * (or the minute window for tiers without a daily limit), as the X-RateLimit-* headers do.
 */
export interface LimitDecision {
  allowed: boolean;
  tier: Tier;
  limit: number;
  remaining: number;
  /** When the reported window resets. */
  reset: Date;
  /** Set when refused: the window that ran out, its limit and reset, and seconds to wait. */
  exceeded?: { window: Window; limit: number; reset: Date; retryAfterSec: number };
  /** Per-window state for the IETF draft RateLimit / RateLimit-Policy headers. */
  windows: { window: Window; limit: number; remaining: number; resetSec: number }[];
}

const DAY_SEC = 86_400;

/** A wait in ms as whole seconds for `Retry-After` and `retry_after`: rounded up, at least 1 (a 0 would invite a retry at once, refused again). */
function secondsUp(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Next 00:00 UTC after `now`. */
export function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

interface Pair {
  minute: RateLimiterAbstract;
  day: RateLimiterAbstract | null;
}

/**
 * rate-limiter-flexible's in-memory store (`RateLimiterMemory._memoryStorage`, version pinned
 * in package.json): synchronous fixed-window counters, `value` = points used, `msBeforeNext`
 * = ms until the window ends (-1: no expiry).
 */
interface MemoryStore {
  get(key: string): { consumedPoints: number; msBeforeNext: number } | null;
  incrby(key: string, value: number, durationSec: number): { consumedPoints: number; msBeforeNext: number };
}

/**
 * One fixed-window counter as both stores keep it: under `<keyPrefix>:<subject>`, at most
 * `points` per `durationSec`, in Redis (an integer with an expiry, as RateLimiterRedis writes
 * it) and in the memory limiter that stands in for Redis when it is unreachable.
 */
export interface Counter {
  readonly keyPrefix: string;
  readonly points: number;
  readonly durationSec: number;
  readonly memory: MemoryStore;
}

/** A fixed-window budget (`TierRateLimiter.budget`): failed authentications per IP, key management per user. */
export interface Budget {
  /**
   * Counts `points` events (default 1) of `subject`; refused when they do not all fit in what
   * is left of the budget (nothing is then counted).
   */
  consume(
    subject: string,
    points?: number,
  ): Promise<{ allowed: boolean; retryAfterSec: number; remaining: number; resetSec: number; resetMs: number }>;
  /** Whether `subject` has used up the budget, without counting anything. */
  exhausted(subject: string): Promise<{ exhausted: boolean; retryAfterSec: number }>;
  /** The budget's counter, for `TierRateLimiter.admit` and `check`. */
  readonly counter: Counter;
}

/** Redis key of the marker of a revoked API key (`markRevoked`); the key id follows. */
const REVOKED_PREFIX = 'kc:revoked:';
/** Redis key of the tier epoch (`bumpTierEpoch`): changed by every plan change of any user. */
const EPOCH_KEY = 'kc:epoch';
/**
 * How long a revocation marker stays in Redis, s: longer than any key-cache entry lives
 * (services/keys.ts, KEY_CACHE_TTL_MS), so that no instance can hold a revoked key that the
 * marker no longer refuses.
 */
export const REVOCATION_MARKER_TTL_SEC = 3600;

/**
 * The admission of one request, as a Lua function `admit(K, A)` of the batch script below
 * (Redis, EVALSHA through ioredis `defineCommand`). In order:
 * 1. when A[1] > 0, refuses (status 1, with the budget's PTTL) if the failed-auth counter
 *    K[1] has reached A[1];
 * 2. when A[2] = '1', refuses if the key's revocation marker K[2] exists (status 2) or
 *    the tier epoch K[3] is not A[3] (status 3: the caller's tier may be stale);
 * 3. checks the A[4] windows K[4..] (limit A[3+2i], duration A[4+2i] s): if any
 *    is used up, counts nothing (status 4); otherwise counts one in each (status 0).
 * Returns {status, epoch, ...} and per window {used, pttl} (after counting when counted).
 *
 * The script runs a batch of such admissions (`AdmitBatch`), one after the other, atomically
 * as a whole: ARGV[1] = their number, then per admission its key count, its argument count
 * and its arguments; KEYS = their keys in the same order. Returns one reply per admission.
 * Each admission sees the counts left by the ones before it, exactly as separate scripts
 * in the same order would.
 */
const ADMIT_LUA = `
local function admit(K, A)
  local ep = redis.call('get', K[3]) or '0'
  local af = tonumber(A[1])
  if af > 0 then
    local used = tonumber(redis.call('get', K[1]) or '0')
    if used >= af then return {1, ep, redis.call('pttl', K[1])} end
  end
  if A[2] == '1' then
    if redis.call('exists', K[2]) == 1 then return {2, ep} end
    if ep ~= A[3] then return {3, ep} end
  end
  local n = tonumber(A[4])
  local out = {0, ep}
  local refused = false
  for i = 1, n do
    local k = K[3 + i]
    local used = tonumber(redis.call('get', k) or '0')
    out[1 + 2 * i] = used
    out[2 + 2 * i] = redis.call('pttl', k)
    if used + 1 > tonumber(A[3 + 2 * i]) then refused = true end
  end
  if refused then
    out[1] = 4
    return out
  end
  for i = 1, n do
    local k = K[3 + i]
    local dur = A[4 + 2 * i]
    redis.call('set', k, 0, 'EX', dur, 'NX')
    out[1 + 2 * i] = redis.call('incr', k)
    local ttl = redis.call('pttl', k)
    if ttl == -1 then
      redis.call('expire', k, dur)
      ttl = 1000 * tonumber(dur)
    end
    out[2 + 2 * i] = ttl
  end
  return out
end
local replies = {}
local ki, ai = 0, 2
for e = 1, tonumber(ARGV[1]) do
  local nk, na = tonumber(ARGV[ai]), tonumber(ARGV[ai + 1])
  ai = ai + 2
  local K, A = {}, {}
  for j = 1, nk do K[j] = KEYS[ki + j] end
  for j = 1, na do A[j] = ARGV[ai + j - 1] end
  ki, ai = ki + nk, ai + na
  replies[e] = admit(K, A)
end
return replies
`;

/** The ioredis client with the admission script defined on it. */
type AdmitRedis = Redis & { mktAdmit(numKeys: number, ...args: string[]): Promise<(number | string)[][]> };

/**
 * Admissions per script call at most (`AdmitBatch`). A full batch goes to Redis at once, while
 * the rest of the turn's requests are still being read, so that Redis works on it meanwhile
 * instead of the process waiting for one reply to the whole turn. Measured with 32
 * connections, PostgreSQL + Redis, one process per run (docs/benchmarks.md): 16 gave 11.4k
 * req/s at 83 µs of server CPU per request, 128 (one call per turn) 9.5k at 89 µs, one call
 * per request 9.4k at 105 µs.
 */
const MAX_BATCH = 16;

/**
 * The admissions asked in one turn of the event loop, sent to Redis together: MAX_BATCH per
 * script call (ADMIT_LUA). The first admission of a turn schedules a call for the turn's check
 * phase (`setImmediate`), after every socket read of its poll phase, and each batch that fills
 * up goes at once: requests that arrive together share round trips and commands, instead of
 * one each. No admission waits longer than that turn. One batch per Redis client, shared by
 * every limiter on it.
 */
class AdmitBatch {
  #keys: string[] = [];
  #args: string[] = [];
  #waiting: { resolve(reply: (number | string)[]): void; reject(e: unknown): void }[] = [];
  #scheduled = false;

  constructor(private readonly redis: AdmitRedis) {}

  /**
   * Adds one admission (its KEYS and ARGV as `admit(K, A)` takes them).
   * @returns its reply; rejects when the call fails or times out (the client's command timeout).
   */
  add(keys: string[], args: string[]): Promise<(number | string)[]> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      for (const k of keys) this.#keys.push(k);
      this.#args.push(String(keys.length), String(args.length));
      for (const a of args) this.#args.push(a);
      if (this.#waiting.length >= MAX_BATCH) this.#flush();
      else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    const waiting = this.#waiting;
    if (waiting.length === 0) return;
    const keys = this.#keys;
    const args = this.#args;
    this.#waiting = [];
    this.#keys = [];
    this.#args = [];
    this.redis.mktAdmit(keys.length, ...keys, String(waiting.length), ...args).then(
      (replies) => {
        for (let i = 0; i < waiting.length; i++) waiting[i]!.resolve(replies[i]!);
      },
      (e: unknown) => {
        for (const w of waiting) w.reject(e);
      },
    );
  }
}

/** The admission batch of each Redis client (see AdmitBatch). */
const batches = new WeakMap<Redis, AdmitBatch>();

/**
 * What `admit` and `check` decide beside the counts: the client address is over its
 * failed-auth budget (`blocked`), the key was revoked (`revoked`), or the tier epoch moved
 * since the caller's tier was read (`stale`: look the key up again).
 */
export type Verdict =
  /** `resetMs`: ms until the failed-auth budget's window ends. */
  | { kind: 'blocked'; retryAfterSec: number; resetMs: number }
  | { kind: 'revoked' }
  | { kind: 'stale'; epoch: string }
  | { kind: 'ok'; epoch: string };

/** The outcome of `admit`. */
export type Admission =
  | Exclude<Verdict, { kind: 'ok' }>
  | {
      kind: 'ok';
      epoch: string;
      /** The caller's own decision (both windows); refused when its own quota ran out. */
      own: LimitDecision;
      /** The account ceiling's decision when one was given; refused when it ran out (and `own` was allowed). */
      account: LimitDecision | null;
    };

/** What `admit` checks and counts (see there). */
export interface AdmitRequest {
  subject: string;
  tier: Tier;
  now?: Date;
  /** The account ceiling (a `scaled` limiter) and the subject it counts (`user:<id>`). */
  account?: { limiter: TierRateLimiter; subject: string };
  /** Refuse first when `subject` has used up this budget (the failed-authentication budget). */
  failedAuth?: { budget: Budget; subject: string };
  /** Refuse when the key `keyId` was revoked or the tier epoch is no longer `epoch` (Redis only). */
  guard?: { keyId: string; epoch: string };
}

/**
 * Per-subject rate limiting per tier over two windows, a rolling-start minute window and
 * the UTC calendar day (reset at 00:00 UTC), with rate-limiter-flexible: in memory by
 * default, in Redis when a client is given (several instances then share one count).
 *
 * Policy when Redis is unreachable: each Redis limiter falls back to an in-memory
 * "insurance" limiter with the same limits, i.e. per-instance counting, and the service
 * keeps answering; Redis is used again as soon as it answers (ioredis reconnects). A Redis
 * that stalls takes the same path: the client's command timeout (src/core.ts,
 * REDIS_COMMAND_TIMEOUT_MS) rejects the command, which sends it to the insurance limiter, and
 * while the connection is not ready (`rejectIfRedisNotReady`) nothing waits on Redis at all.
 * `consume`, `peek` and the budgets all go through these limiters, so all are bounded.
 *
 * A refused request consumes nothing: the points taken by the attempt are given back.
 *
 * `factor` scales every tier's limits (1: the per-key limits of TIER_LIMITS); see `scaled`.
 */
export class TierRateLimiter {
  readonly #pairs = new Map<Tier, Pair>();
  readonly #counters = new Map<Tier, { minute: Counter; day: Counter | null }>();
  readonly #extra = new Map<string, Budget>();
  readonly #scaled = new Map<string, TierRateLimiter>();
  readonly #limits: Record<Tier, { day: number | null; minute: number }>;
  /** The admission batch of the Redis client (shared with every limiter on it); null without Redis. */
  readonly #batch: AdmitBatch | null = null;

  constructor(
    private readonly redis: Redis | null,
    private readonly prefix = 'rl',
    factor = 1,
  ) {
    this.#limits = Object.fromEntries(
      Object.entries(TIER_LIMITS).map(([t, l]) => [t, { minute: l.minute * factor, day: l.day === null ? null : l.day * factor }]),
    ) as Record<Tier, { day: number | null; minute: number }>;
    for (const [tier, lim] of Object.entries(this.#limits) as [Tier, (typeof TIER_LIMITS)[Tier]][]) {
      const minute = this.#make(`${tier}:m`, lim.minute, 60);
      // The day key carries the UTC date, so the window is the calendar day.
      const day = lim.day === null ? null : this.#make(`${tier}:d`, lim.day, DAY_SEC + 60);
      this.#pairs.set(tier, { minute: minute.limiter, day: day?.limiter ?? null });
      this.#counters.set(tier, { minute: minute.counter, day: day?.counter ?? null });
    }
    if (redis) {
      if (!('mktAdmit' in redis)) redis.defineCommand('mktAdmit', { lua: ADMIT_LUA });
      let batch = batches.get(redis);
      if (!batch) {
        batch = new AdmitBatch(redis as AdmitRedis);
        batches.set(redis, batch);
      }
      this.#batch = batch;
    }
  }

  /**
   * A limiter with the same windows and store (memory, or the same Redis: shared by every
   * instance) whose limits are `factor` × each tier's, counting under `<prefix>:<name>`; one
   * per name and factor. Used for the account ceiling (MAX_ACTIVE_KEYS × the per-key limits).
   */
  scaled(name: string, factor: number): TierRateLimiter {
    const id = `${name}:${factor}`;
    let l = this.#scaled.get(id);
    if (!l) {
      l = new TierRateLimiter(this.redis, `${this.prefix}:${name}`, factor);
      this.#scaled.set(id, l);
    }
    return l;
  }

  #make(name: string, points: number, duration: number): { limiter: RateLimiterAbstract; counter: Counter } {
    const keyPrefix = `${this.prefix}:${name}`;
    const memory = new RateLimiterMemory({ points, duration, keyPrefix });
    const counter: Counter = {
      keyPrefix,
      points,
      durationSec: duration,
      memory: (memory as unknown as { _memoryStorage: MemoryStore })._memoryStorage,
    };
    if (!this.redis) return { limiter: memory, counter };
    const limiter = new RateLimiterRedis({
      storeClient: this.redis,
      points,
      duration,
      keyPrefix,
      rejectIfRedisNotReady: true,
      insuranceLimiter: memory,
    });
    return { limiter, counter };
  }

  /**
   * A simple fixed-window limiter for other budgets (failed authentications per IP, key
   * management per user), shared through Redis like the tier limits.
   */
  budget(name: string, points: number, durationSec: number): Budget {
    const known = this.#extra.get(name);
    if (known) return known;
    const made = this.#make(`budget:${name}`, points, durationSec);
    const lim = made.limiter;
    const b: Budget = {
      counter: made.counter,
      async exhausted(subject) {
        const r = await lim.get(subject).catch(() => null);
        const used = r?.consumedPoints ?? 0;
        return { exhausted: used >= points, retryAfterSec: r ? secondsUp(r.msBeforeNext) : 0 };
      },
      async consume(subject, n = 1) {
        try {
          const r = await lim.consume(subject, n);
          return {
            allowed: true,
            retryAfterSec: 0,
            remaining: r.remainingPoints,
            resetSec: secondsUp(r.msBeforeNext),
            resetMs: Math.max(0, r.msBeforeNext),
          };
        } catch (e) {
          if (e instanceof RateLimiterRes) {
            await lim.reward(subject, n).catch(() => {});
            const retryAfterSec = secondsUp(e.msBeforeNext);
            return { allowed: false, retryAfterSec, remaining: 0, resetSec: retryAfterSec, resetMs: Math.max(0, e.msBeforeNext) };
          }
          throw e;
        }
      },
    };
    this.#extra.set(name, b);
    return b;
  }

  /** Whether Redis is the store now (configured and ready); otherwise the memory limiters count. */
  #redisReady(): boolean {
    return this.redis !== null && this.redis.status === 'ready';
  }

  /**
   * Marks API key `keyId` revoked in Redis for REVOCATION_MARKER_TTL_SEC, so that `admit` and
   * `check` refuse it on every instance from now on, whatever their key caches hold. No-op
   * without Redis.
   * @throws when Redis does not answer (bounded by the command timeout).
   */
  async markRevoked(keyId: string): Promise<void> {
    if (this.redis) await this.redis.set(`${REVOKED_PREFIX}${keyId}`, '1', 'EX', REVOCATION_MARKER_TTL_SEC);
  }

  /**
   * Moves the tier epoch in Redis (after a plan change), so that `admit` and `check` answer
   * `stale` to a caller whose tier was read before it. No-op without Redis.
   * @throws when Redis does not answer (bounded by the command timeout).
   */
  async bumpTierEpoch(): Promise<void> {
    if (this.redis) await this.redis.incr(EPOCH_KEY);
  }

  /**
   * The failed-auth budget and the key guards without counting anything: `blocked` when
   * `failedAuth.subject` has used up the budget, `revoked`/`stale` as in `admit`, else `ok`
   * with the current tier epoch (read before a key look-up, so that a plan change after the
   * look-up is seen as `stale` later). One Redis round trip; in memory (Redis absent or down:
   * no guards, epoch '0') synchronous.
   */
  check(failedAuth: { budget: Budget; subject: string } | null, guard?: { keyId: string; epoch: string }): Verdict | Promise<Verdict> {
    const r = this.#run([], failedAuth ?? undefined, guard);
    return r instanceof Promise ? r.then((x) => x.verdict) : r.verdict;
  }

  /**
   * Counts one request of `subject` in both windows of its tier and, when given, of the
   * account ceiling, after the failed-auth budget and the key guards: everything in one Redis
   * script call (one round trip, shared with the other admissions of the same event-loop turn:
   * AdmitBatch), or synchronously in memory when Redis is absent, not ready, or
   * fails (then the guards are skipped: the key cache's PostgreSQL notices stand alone).
   * Same semantics as `consume` followed by the ceiling's `consume`: a refused request counts
   * nothing anywhere, and a refused decision's `exceeded` is the window with the longest wait.
   * The returned promise never rejects for a store failure.
   */
  admit(req: AdmitRequest): Admission | Promise<Admission> {
    const now = req.now ?? new Date();
    let date = '';
    const windows: { counter: Counter; key: string }[] = [];
    const push = (l: TierRateLimiter, subject: string) => {
      const c = l.#counters.get(req.tier)!;
      windows.push({ counter: c.minute, key: subject });
      if (!c.day) return 1;
      date ||= now.toISOString().slice(0, 10);
      windows.push({ counter: c.day, key: `${subject}:${date}` });
      return 2;
    };
    const ownN = push(this, req.subject);
    if (req.account) push(req.account.limiter, req.account.subject);
    const finish = (x: { verdict: Verdict; counts: Used[] }): Admission => {
      if (x.verdict.kind !== 'ok') return x.verdict;
      const own = this.#group(req.tier, now, x.counts.slice(0, ownN));
      const account = req.account ? req.account.limiter.#group(req.tier, now, x.counts.slice(ownN)) : null;
      return { kind: 'ok', epoch: x.verdict.epoch, own, account };
    };
    const r = this.#run(windows, req.failedAuth, req.guard);
    return r instanceof Promise ? r.then(finish) : finish(r);
  }

  /** The decision of one subject's windows (minute, then day when the tier has one) from their counts. */
  #group(tier: Tier, now: Date, counts: Used[]): LimitDecision {
    const lim = this.#limits[tier];
    const [m, d] = counts as [Used, Used | undefined];
    const res = (u: Used) => ({ consumedPoints: u.used, msBeforeNext: u.msBeforeNext > 0 ? u.msBeforeNext : 0 }) as RateLimiterRes;
    const minuteRes = m.used > 0 ? res(m) : null;
    const dayRes = d && d.used > 0 ? res(d) : null;
    if (!m.refused && !d?.refused) return this.#decision(tier, now, minuteRes, dayRes);
    const midnight = nextUtcMidnight(now);
    const dayWait = secondsUp(midnight.getTime() - now.getTime());
    const minuteWait = secondsUp(Math.max(0, m.msBeforeNext));
    // When both are used up, the caller must wait for the longer one (the day, as a rule).
    if (d?.refused && (!m.refused || dayWait >= minuteWait))
      return this.#decision(tier, now, minuteRes, dayRes, { window: 'day', limit: lim.day!, reset: midnight, retryAfterSec: dayWait });
    return this.#decision(tier, now, minuteRes, dayRes, {
      window: 'minute',
      limit: lim.minute,
      reset: new Date(now.getTime() + Math.max(0, m.msBeforeNext)),
      retryAfterSec: minuteWait,
    });
  }

  /** Runs the admission in Redis when it is ready, else (or when it fails) in memory. */
  #run(
    windows: { counter: Counter; key: string }[],
    failedAuth?: { budget: Budget; subject: string },
    guard?: { keyId: string; epoch: string },
  ): { verdict: Verdict; counts: Used[] } | Promise<{ verdict: Verdict; counts: Used[] }> {
    if (!this.#batch || !this.#redisReady()) return runInMemory(windows, failedAuth);
    const fa = failedAuth?.budget.counter;
    const keys = [
      fa ? `${fa.keyPrefix}:${failedAuth!.subject}` : `${EPOCH_KEY}:none`,
      guard ? `${REVOKED_PREFIX}${guard.keyId}` : `${REVOKED_PREFIX}none`,
      EPOCH_KEY,
      ...windows.map((w) => `${w.counter.keyPrefix}:${w.key}`),
    ];
    const args = [String(fa ? fa.points : 0), guard ? '1' : '0', guard?.epoch ?? '', String(windows.length)];
    for (const w of windows) args.push(String(w.counter.points), String(w.counter.durationSec));
    return this.#batch.add(keys, args).then(
      (out) => fromScript(out, windows),
      // Redis failed or stalled (command timeout): count in memory, as the insurance limiters do.
      () => runInMemory(windows, failedAuth),
    );
  }

  #decision(
    tier: Tier,
    now: Date,
    minute: RateLimiterRes | null,
    day: RateLimiterRes | null,
    exceeded?: LimitDecision['exceeded'],
  ): LimitDecision {
    const lim = this.#limits[tier];
    const minuteUsed = minute ? Math.min(minute.consumedPoints, lim.minute) : 0;
    const minuteMs = minute?.msBeforeNext ?? 60_000;
    const minuteReset = Math.ceil(minuteMs / 1000);
    const windows: LimitDecision['windows'] = [
      { window: 'minute', limit: lim.minute, remaining: Math.max(0, lim.minute - minuteUsed), resetSec: minuteReset },
    ];
    if (lim.day !== null) {
      const midnight = nextUtcMidnight(now);
      const dayUsed = day ? Math.min(day.consumedPoints, lim.day) : 0;
      windows.push({
        window: 'day',
        limit: lim.day,
        remaining: Math.max(0, lim.day - dayUsed),
        resetSec: Math.ceil((midnight.getTime() - now.getTime()) / 1000),
      });
      const d = windows[1]!;
      return { allowed: !exceeded, tier, limit: lim.day, remaining: d.remaining, reset: midnight, exceeded, windows };
    }
    const m = windows[0]!;
    return {
      allowed: !exceeded,
      tier,
      limit: lim.minute,
      remaining: m.remaining,
      // The window's end to the millisecond (as a 429's details.reset), not now + the
      // rounded-up seconds, which moved on with every request of the same window.
      reset: new Date(now.getTime() + minuteMs),
      exceeded,
      windows,
    };
  }

  /**
   * Counts one request of `subject` (a key id, or `ip:<address>`) in its tier.
   * @returns the decision; when refused, nothing stays consumed, and `exceeded` names the
   *   window with the longest wait (the day when both the minute and the day are used up), so
   *   `Retry-After` is the time after which a retry can succeed.
   */
  async consume(subject: string, tier: Tier, now = new Date()): Promise<LimitDecision> {
    const pair = this.#pairs.get(tier)!;
    const dayKey = pair.day ? `${subject}:${now.toISOString().slice(0, 10)}` : '';
    let minute: RateLimiterRes;
    try {
      minute = await pair.minute.consume(subject);
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      await pair.minute.reward(subject).catch(() => {});
      const day = pair.day ? await pair.day.get(dayKey) : null;
      const minuteWait = secondsUp(e.msBeforeNext);
      const dayLimit = this.#limits[tier].day;
      // When the day is used up too, the caller must wait for the day: report the longest wait.
      if (dayLimit !== null && day && day.consumedPoints >= dayLimit) {
        const midnight = nextUtcMidnight(now);
        const dayWait = secondsUp(midnight.getTime() - now.getTime());
        if (dayWait >= minuteWait)
          return this.#decision(tier, now, e, day, { window: 'day', limit: dayLimit, reset: midnight, retryAfterSec: dayWait });
      }
      return this.#decision(tier, now, e, day, {
        window: 'minute',
        limit: this.#limits[tier].minute,
        reset: new Date(now.getTime() + e.msBeforeNext),
        retryAfterSec: minuteWait,
      });
    }
    if (!pair.day) return this.#decision(tier, now, minute, null);
    try {
      const day = await pair.day.consume(dayKey);
      return this.#decision(tier, now, minute, day);
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      await Promise.all([pair.day.reward(dayKey).catch(() => {}), pair.minute.reward(subject).catch(() => {})]);
      const reset = nextUtcMidnight(now);
      const m = await pair.minute.get(subject);
      return this.#decision(tier, now, m, e, {
        window: 'day',
        limit: this.#limits[tier].day!,
        reset,
        retryAfterSec: secondsUp(reset.getTime() - now.getTime()),
      });
    }
  }

  /**
   * Gives back one request that `consume` counted for `subject` at `now` (both windows), when
   * a later check refuses the request (e.g. the account ceiling): refusals consume nothing.
   * Best effort: a store failure leaves the count as it was.
   */
  async refund(subject: string, tier: Tier, now = new Date()): Promise<void> {
    const pair = this.#pairs.get(tier)!;
    await Promise.all([
      pair.minute.reward(subject).catch(() => {}),
      pair.day ? pair.day.reward(`${subject}:${now.toISOString().slice(0, 10)}`).catch(() => {}) : null,
    ]);
  }

  /** The current state of `subject` without counting anything (for refused, unauthenticated requests). */
  async peek(subject: string, tier: Tier, now = new Date()): Promise<LimitDecision> {
    const pair = this.#pairs.get(tier)!;
    const [m, d] = await Promise.all([
      pair.minute.get(subject).catch(() => null),
      pair.day ? pair.day.get(`${subject}:${now.toISOString().slice(0, 10)}`).catch(() => null) : null,
    ]);
    return this.#decision(tier, now, m, d);
  }
}

/** One window's state from an admission: points used (after counting when counted), ms left, and whether it refused. */
interface Used {
  used: number;
  msBeforeNext: number;
  refused: boolean;
}

/** The script's reply as a verdict and per-window counts. */
function fromScript(out: (number | string)[], windows: { counter: Counter }[]): { verdict: Verdict; counts: Used[] } {
  const status = Number(out[0]);
  const epoch = String(out[1]);
  if (status === 1) {
    const ms = Math.max(0, Number(out[2]));
    return { verdict: { kind: 'blocked', retryAfterSec: secondsUp(ms), resetMs: ms }, counts: [] };
  }
  if (status === 2) return { verdict: { kind: 'revoked' }, counts: [] };
  if (status === 3) return { verdict: { kind: 'stale', epoch }, counts: [] };
  const counts = windows.map((w, i) => {
    const used = Number(out[2 + 2 * i]);
    return { used, msBeforeNext: Number(out[3 + 2 * i]), refused: status === 4 && used + 1 > w.counter.points };
  });
  return { verdict: { kind: 'ok', epoch }, counts };
}

/** The admission in the memory limiters (no Redis, or Redis failing): synchronous, no guards, epoch '0'. */
function runInMemory(
  windows: { counter: Counter; key: string }[],
  failedAuth?: { budget: Budget; subject: string },
): { verdict: Verdict; counts: Used[] } {
  if (failedAuth) {
    const c = failedAuth.budget.counter;
    const r = c.memory.get(`${c.keyPrefix}:${failedAuth.subject}`);
    if (r && (r.msBeforeNext > 0 || r.msBeforeNext === -1) && r.consumedPoints >= c.points)
      return {
        verdict: { kind: 'blocked', retryAfterSec: secondsUp(r.msBeforeNext), resetMs: Math.max(0, r.msBeforeNext) },
        counts: [],
      };
  }
  // Count first, then give back every window's point if one of them is over its limit: the
  // same outcome as checking all and counting only when none is over (nothing else runs in
  // between), with one storage call per window on the usual path instead of two.
  const counts: Used[] = [];
  let refused = false;
  for (const w of windows) {
    const r = w.counter.memory.incrby(`${w.counter.keyPrefix}:${w.key}`, 1, w.counter.durationSec);
    const over = r.consumedPoints > w.counter.points;
    refused ||= over;
    counts.push({ used: r.consumedPoints, msBeforeNext: r.msBeforeNext, refused: over });
  }
  if (refused) {
    for (let i = 0; i < windows.length; i++) {
      const w = windows[i]!;
      w.counter.memory.incrby(`${w.counter.keyPrefix}:${w.key}`, -1, w.counter.durationSec);
      counts[i]!.used -= 1;
    }
  }
  return { verdict: { kind: 'ok', epoch: '0' }, counts };
}

/** `X-RateLimit-Reset` of the decisions resetting at the same millisecond. */
const resetText = isoFormatter();

/**
 * The response headers of a decision: X-RateLimit-* (README, "Tiers and rate limits"), X-Service-Tier, and the
 * IETF draft `RateLimit-Policy` / `RateLimit` (draft-ietf-httpapi-ratelimit-headers),
 * plus `Retry-After` when refused.
 */
export function rateLimitHeaders(d: LimitDecision): Record<string, string> {
  let policy = '';
  let state = '';
  for (const w of d.windows) {
    const sep = policy === '' ? '' : ', ';
    policy += `${sep}"${w.window}";q=${w.limit};w=${w.window === 'minute' ? 60 : DAY_SEC}`;
    state += `${sep}"${w.window}";r=${w.remaining};t=${w.resetSec}`;
  }
  const h: Record<string, string> = {
    'X-RateLimit-Limit': String(d.limit),
    'X-RateLimit-Remaining': String(d.remaining),
    'X-RateLimit-Reset': resetText(d.reset.getTime()),
    'X-Service-Tier': d.tier,
    'RateLimit-Policy': policy,
    RateLimit: state,
  };
  if (d.exceeded) h['Retry-After'] = String(d.exceeded.retryAfterSec);
  return h;
}
