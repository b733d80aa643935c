/**
 * Tiers and their limits (README, "Tiers and rate limits"). `day: null` means no daily limit
 * (the API tier); then the rate-limit headers describe the per-minute window.
 */
export const TIERS = ['unauthenticated', 'free', 'pro', 'api'] as const;
/** One of TIERS (`unauthenticated`: a caller that sent no credentials). */
export type Tier = (typeof TIERS)[number];

/** Tiers a user's plan can be set to. */
export const PLAN_TIERS = ['free', 'pro', 'api'] as const;
/** One of PLAN_TIERS (`users set-tier`, the admin channel). */
export type PlanTier = (typeof PLAN_TIERS)[number];

/**
 * Requests allowed per tier: `day` per UTC calendar day (reset at 00:00 UTC; null: no daily
 * limit) and `minute` per minute window (rate-limit/limiter.ts, TierRateLimiter).
 */
export const TIER_LIMITS: Record<Tier, { day: number | null; minute: number }> = {
  unauthenticated: { day: 10, minute: 5 },
  free: { day: 50, minute: 10 },
  pro: { day: 5000, minute: 100 },
  api: { day: null, minute: 500 },
};

/** Tiers that may read the signal history (README, "Tiers and rate limits"). */
export const HISTORY_TIERS: readonly Tier[] = ['pro', 'api'];
