/**
 * Raw chain metrics with 7-day changes, as of one date (point-in-time).
 */
import type { MetricPoint } from './types.ts';
import { addDays, assertAscending, lastIndexOnOrBefore } from './util.ts';

/** One metric's newest value and its 7-day change. */
export interface ChainMetricValue {
  /** Newest value dated <= asOf, in the metric's own unit; null when there is none. */
  value: number | null;
  /** value minus the value dated exactly 7 days before `as_of`; null when that day has no value. */
  change_7d: number | null;
  /** change_7d / |base| * 100 (percent); null when change_7d is null or the base is 0. */
  change_7d_pct: number | null;
  /** Date of `value` (may be older than asOf when the source stopped); null when no value. */
  as_of: string | null;
}

/**
 * For every metric key passed in: its newest value dated <= `asOf` and the change against the
 * value dated exactly 7 calendar days before that value's own date. A missing base day gives
 * null changes: a nearby day is never used instead. The percent change divides by the
 * absolute base so a signed metric (e.g. net inflows) keeps the sign of the change.
 *
 * @param metrics series keyed by metric name, each strictly ascending by date.
 * @param asOf the as-of day, YYYY-MM-DD.
 * @returns the same keys, each a {@link ChainMetricValue} (all null when no data <= asOf).
 * @throws RangeError on an unsorted series or a bad date.
 */
export function computeChainMetrics(metrics: Record<string, MetricPoint[]>, asOf: string): Record<string, ChainMetricValue> {
  addDays(asOf, 0); // validates asOf
  const out: Record<string, ChainMetricValue> = {};
  for (const [name, pts] of Object.entries(metrics)) {
    assertAscending(pts, `metric ${name}`);
    const i = lastIndexOnOrBefore(pts, asOf);
    if (i < 0) {
      out[name] = { value: null, change_7d: null, change_7d_pct: null, as_of: null };
      continue;
    }
    const cur = pts[i]!;
    const baseDate = addDays(cur.date, -7);
    const j = lastIndexOnOrBefore(pts, baseDate);
    const base = j >= 0 && pts[j]!.date === baseDate ? pts[j]!.value : null;
    const change = base === null ? null : cur.value - base;
    const pct = change === null || base === null || base === 0 ? null : (change / Math.abs(base)) * 100;
    out[name] = { value: cur.value, change_7d: change, change_7d_pct: pct, as_of: cur.date };
  }
  return out;
}
