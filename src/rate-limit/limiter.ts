import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { TIER_LIMITS, type Tier } from '../auth/tiers.ts';

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

/** Next 00:00 UTC after `now`. */
export function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

interface Pair {
  minute: RateLimiterAbstract;
  day: RateLimiterAbstract | null;
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
  readonly #extra = new Map<string, RateLimiterAbstract>();
  readonly #scaled = new Map<string, TierRateLimiter>();
  readonly #limits: Record<Tier, { day: number | null; minute: number }>;

  constructor(
    private readonly redis: Redis | null,
    private readonly prefix = 'rl',
    factor = 1,
  ) {
    this.#limits = Object.fromEntries(
      Object.entries(TIER_LIMITS).map(([t, l]) => [t, { minute: l.minute * factor, day: l.day === null ? null : l.day * factor }]),
    ) as Record<Tier, { day: number | null; minute: number }>;
    for (const [tier, lim] of Object.entries(this.#limits) as [Tier, (typeof TIER_LIMITS)[Tier]][]) {
      this.#pairs.set(tier, {
        minute: this.#make(`${tier}:m`, lim.minute, 60),
        // The day key carries the UTC date, so the window is the calendar day.
        day: lim.day === null ? null : this.#make(`${tier}:d`, lim.day, DAY_SEC + 60),
      });
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

  #make(name: string, points: number, duration: number): RateLimiterAbstract {
    const keyPrefix = `${this.prefix}:${name}`;
    const memory = new RateLimiterMemory({ points, duration, keyPrefix });
    if (!this.redis) return memory;
    return new RateLimiterRedis({
      storeClient: this.redis,
      points,
      duration,
      keyPrefix,
      rejectIfRedisNotReady: true,
      insuranceLimiter: memory,
    });
  }

  /**
   * A simple fixed-window limiter for other budgets (failed authentications per IP, key
   * management per user), shared through Redis like the tier limits.
   */
  budget(
    name: string,
    points: number,
    durationSec: number,
  ): {
    consume(subject: string): Promise<{ allowed: boolean; retryAfterSec: number; remaining: number; resetSec: number }>;
    exhausted(subject: string): Promise<{ exhausted: boolean; retryAfterSec: number }>;
  } {
    let l = this.#extra.get(name);
    if (!l) {
      l = this.#make(`budget:${name}`, points, durationSec);
      this.#extra.set(name, l);
    }
    const lim = l;
    return {
      /** Whether `subject` has used up the budget, without counting anything. */
      async exhausted(subject) {
        const r = await lim.get(subject).catch(() => null);
        const used = r?.consumedPoints ?? 0;
        return { exhausted: used >= points, retryAfterSec: r ? Math.max(1, Math.ceil(r.msBeforeNext / 1000)) : 0 };
      },
      async consume(subject) {
        try {
          const r = await lim.consume(subject);
          return { allowed: true, retryAfterSec: 0, remaining: r.remainingPoints, resetSec: Math.max(1, Math.ceil(r.msBeforeNext / 1000)) };
        } catch (e) {
          if (e instanceof RateLimiterRes) {
            await lim.reward(subject).catch(() => {});
            const retryAfterSec = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
            return { allowed: false, retryAfterSec, remaining: 0, resetSec: retryAfterSec };
          }
          throw e;
        }
      },
    };
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
    const minuteReset = Math.ceil((minute?.msBeforeNext ?? 60_000) / 1000);
    const windows: LimitDecision['windows'] = [
      { window: 'minute', limit: lim.minute, remaining: Math.max(0, lim.minute - minuteUsed), resetSec: minuteReset },
    ];
    const midnight = nextUtcMidnight(now);
    if (lim.day !== null) {
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
      reset: new Date(now.getTime() + m.resetSec * 1000),
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
      const minuteWait = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
      const dayLimit = this.#limits[tier].day;
      // When the day is used up too, the caller must wait for the day: report the longest wait.
      if (dayLimit !== null && day && day.consumedPoints >= dayLimit) {
        const midnight = nextUtcMidnight(now);
        const dayWait = Math.max(1, Math.ceil((midnight.getTime() - now.getTime()) / 1000));
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
        retryAfterSec: Math.max(1, Math.ceil((reset.getTime() - now.getTime()) / 1000)),
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

/**
 * The response headers of a decision: X-RateLimit-* (README, "Tiers and rate limits"), X-Service-Tier, and the
 * IETF draft `RateLimit-Policy` / `RateLimit` (draft-ietf-httpapi-ratelimit-headers),
 * plus `Retry-After` when refused.
 */
export function rateLimitHeaders(d: LimitDecision): Record<string, string> {
  const h: Record<string, string> = {
    'X-RateLimit-Limit': String(d.limit),
    'X-RateLimit-Remaining': String(d.remaining),
    'X-RateLimit-Reset': d.reset.toISOString(),
    'X-Service-Tier': d.tier,
    'RateLimit-Policy': d.windows.map((w) => `"${w.window}";q=${w.limit};w=${w.window === 'minute' ? 60 : DAY_SEC}`).join(', '),
    RateLimit: d.windows.map((w) => `"${w.window}";r=${w.remaining};t=${w.resetSec}`).join(', '),
  };
  if (d.exceeded) h['Retry-After'] = String(d.exceeded.retryAfterSec);
  return h;
}
