import type { SeriesKind } from '../engine/types.ts';
import { addDays, daysBetween } from '../engine/util.ts';

/**
 * How many days a series may lag the reference day before its numbers are stale, by kind
 * (docs/live-data.md, "Freshness"). A daily series is due the day after each UTC day ends,
 * so 1 day of lag is normal; chain metrics are published by their sources 1-3 days late.
 */
export const MAX_LAG_DAYS: Record<SeriesKind, number> = { candles: 1, fear_greed: 1, funding: 1, metric: 3 };

/** Readable names of the series kinds, for messages. */
const KIND_LABEL: Record<SeriesKind, string> = {
  candles: 'prices',
  fear_greed: 'Fear & Greed',
  funding: 'funding rates',
  metric: 'chain metric',
};

/** A freshness verdict: `stale` with the reason(s) when an input is older than its cadence allows. */
export interface Staleness {
  stale: boolean;
  stale_reason: string | null;
}

/** One input of an answer: what it is, its kind (for the allowed lag) and its newest day (null: no data). */
export interface FreshnessInput {
  label: string;
  kind: SeriesKind;
  newest: string | null;
  cadenceHours?: number;
}

/**
 * The reason an input is stale at `reference` (YYYY-MM-DD), or null when it is fresh or has
 * no data at all (missing data is reported as missing, not as stale).
 * Allowed lag: MAX_LAG_DAYS of its kind plus the cadence beyond one day.
 */
export function staleReason(input: FreshnessInput, reference: string): string | null {
  if (!input.newest) return null;
  const lag = daysBetween(input.newest, reference);
  const cadence = input.cadenceHours ?? 24;
  const allowed = MAX_LAG_DAYS[input.kind] + Math.max(0, Math.ceil(cadence / 24) - 1);
  if (lag <= allowed) return null;
  return `${input.label} (${KIND_LABEL[input.kind]}) end ${input.newest}, ${lag} days before ${reference} (expected every ${cadence} h)`;
}

/** Combines the verdicts of several inputs into one. */
export function staleness(inputs: FreshnessInput[], reference: string): Staleness {
  const reasons = inputs.map((i) => staleReason(i, reference)).filter((r): r is string => r !== null);
  return { stale: reasons.length > 0, stale_reason: reasons.length ? reasons.join('; ') : null };
}

/** The newest complete UTC day at `now`: yesterday (the reference day of live data). */
export function newestCompleteDay(now: Date = new Date()): string {
  return addDays(now.toISOString().slice(0, 10), -1);
}
