/**
 * UTC-day helpers and shared zod pieces of the live adapters: day ↔ epoch conversion, the
 * "complete days in (after, today)" cut, and the daily funding mean.
 */
import { z } from 'zod';
import type { Candle, ChainId, MetricPoint } from '../../engine/types.ts';
import { DAY_MS, dayNumber, dayString, isCalendarDay } from '../../engine/util.ts';
import type { HttpClient } from './http.ts';
import { UpstreamError, type LiveSource, type UpstreamName } from './source.ts';

/** What every adapter factory receives: the shared HTTP client and the resolved base URLs. */
export interface AdapterContext {
  http: HttpClient;
  baseUrls: Record<UpstreamName, string>;
}

/**
 * The chain metrics that can be below 0 (a net flow); every other live metric is a count, a
 * volume, fees or a TVL, none of which can (docs/live-data.md, "Validation").
 */
const SIGNED_METRICS: ReadonlySet<string> = new Set(['net_inflow_usd']);

/**
 * The LiveSource of a daily chain metric (`metric:<chain>:<metric>`, cadence 24 h) from the
 * upstream at `base`: the descriptor's fields filled in, and `points(after, today, signal)`
 * called once the window is checked (`checkWindow`). `points` returns the metric's complete UTC
 * days in (after, today), ascending, as `LiveSource.fetch` promises, or throws UpstreamError.
 * A negative value of a metric that cannot be negative (all but SIGNED_METRICS) fails the fetch
 * as a format error naming the day and the value: nothing of it is stored.
 */
export function dailyMetricSource(o: {
  chain: ChainId;
  metric: string;
  base: string;
  source: string;
  /** Polling schedule (cron pattern for croner). */
  schedule: string;
  points: (after: string, today: string, signal?: AbortSignal) => Promise<MetricPoint[]>;
}): LiveSource {
  return {
    series: `metric:${o.chain}:${o.metric}`,
    kind: 'metric',
    asset: null,
    chain: o.chain,
    metric: o.metric,
    host: new URL(o.base).host,
    source: o.source,
    cadenceHours: 24,
    schedule: o.schedule,
    async fetch(after, today, signal) {
      checkWindow(after, today);
      const points = await o.points(after, today, signal);
      const negative = SIGNED_METRICS.has(o.metric) ? undefined : points.find((p) => p.value < 0);
      if (negative)
        throw new UpstreamError(
          o.source,
          `${o.source}: unexpected value for ${negative.date}: ${negative.value} (${o.metric} cannot be negative)`,
          'format',
        );
      return { kind: 'metric', points, source: o.source };
    },
  };
}

/** Most pages any adapter follows in one fetch (a guard against a looping upstream). */
export const MAX_PAGES = 200;

/** Milliseconds per UTC day (the engine's, re-exported for the adapters). */
export { DAY_MS };

/** 00:00 UTC of a YYYY-MM-DD day, epoch ms. @throws RangeError on a bad day. */
export function dayStartMs(day: string): number {
  return dayNumber(day) * DAY_MS;
}

/** The UTC day (YYYY-MM-DD) of an epoch-ms instant. */
export function dayOfMs(ms: number): string {
  return dayString(Math.floor(ms / DAY_MS));
}

/** Validates the (after, today) arguments of `LiveSource.fetch`. @throws RangeError. */
export function checkWindow(after: string, today: string): void {
  dayNumber(after);
  dayNumber(today);
  if (after >= today) throw new RangeError(`after (${after}) must be before today (${today})`);
}

/** A decimal number sent as a JSON string (e.g. "105642.93", "-1.2e-05"), parsed to a finite number. */
export const decimalString = z
  .string()
  .regex(/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/, 'expected a decimal number in a string')
  .transform(Number)
  .refine(Number.isFinite, 'not a finite number');

/** A YYYY-MM-DD day of the calendar (growthepie `date`). */
export const isoDay = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'expected YYYY-MM-DD')
  .refine(isCalendarDay, 'not a day of the calendar');

/** A finite JSON number. */
export const finite = z.number().refine(Number.isFinite, 'not a finite number');

/**
 * Keeps the points dated strictly after `after` and strictly before `today`, sorted ascending,
 * with exact duplicates (same date and same values, e.g. from overlapping pages) removed.
 * @throws UpstreamError 'format' when one date carries two different values (never guess which).
 */
export function completeDays<T extends { date: string }>(source: string, path: string, points: T[], after: string, today: string): T[] {
  const kept = points.filter((p) => p.date > after && p.date < today).sort((a, b) => (a.date < b.date ? -1 : a.date > b.date ? 1 : 0));
  const out: T[] = [];
  for (const p of kept) {
    const prev = out.at(-1);
    if (prev && prev.date === p.date) {
      if (JSON.stringify(prev) !== JSON.stringify(p)) {
        throw new UpstreamError(source, `${source}: ${path}: two different values for ${p.date}`, 'format');
      }
      continue;
    }
    out.push(p);
  }
  return out;
}

/**
 * Records one funding print (`ms` → `rate`) in `prints`. The same print seen twice (overlapping
 * pages, a repeated row) is kept once; one time carrying two different rates is an error, never a
 * choice (docs/live-data.md, "Validation").
 * @throws UpstreamError 'format' naming the field and the time.
 */
export function addPrint(prints: Map<number, number>, source: string, path: string, field: string, ms: number, rate: number): void {
  const seen = prints.get(ms);
  if (seen !== undefined && seen !== rate) {
    throw new UpstreamError(
      source,
      `${source}: ${path}: unexpected response format at field ${field}: two different rates for ${new Date(ms).toISOString()} (${seen} and ${rate})`,
      'format',
    );
  }
  prints.set(ms, rate);
}

/**
 * Daily means of funding prints. Each print's rate (a fraction per its `intervalHours`) is
 * converted to per 8 hours (`× 8 / intervalHours`) and grouped by the UTC day of its time;
 * the mean is computed as `first + Σ(x - first) / n`, which is exact when all prints are
 * equal (so a day of identical prints gives back that value to the last bit). A day's
 * `interval_hours` is the shortest interval among its prints.
 */
export function dailyFundingMeans(prints: { ms: number; rate: number; intervalHours: number }[]) {
  const byDay = new Map<string, { xs: number[]; interval: number }>();
  for (const p of prints) {
    const d = dayOfMs(p.ms);
    const day = byDay.get(d) ?? { xs: [], interval: p.intervalHours };
    day.xs.push((p.rate * 8) / p.intervalHours);
    day.interval = Math.min(day.interval, p.intervalHours);
    byDay.set(d, day);
  }
  return [...byDay.entries()].map(([date, { xs, interval }]) => {
    const first = xs[0]!;
    let acc = 0;
    for (const x of xs) acc += x - first;
    return { date, rate: first + acc / xs.length, interval_hours: interval, prints: xs.length };
  });
}

/**
 * Checks that a candle is coherent: positive prices, `low <= open, close <= high`, volume not
 * negative. @throws UpstreamError 'format' naming the field (e.g. `[3]`) otherwise.
 */
export function checkCandle(source: string, path: string, field: string, c: Candle): Candle {
  const ok = c.low > 0 && c.low <= Math.min(c.open, c.close) && c.high >= Math.max(c.open, c.close) && (c.volume === null || c.volume >= 0);
  if (!ok) {
    throw new UpstreamError(
      source,
      `${source}: ${path}: unexpected response format at field ${field}: incoherent candle for ${c.date} (o ${c.open} h ${c.high} l ${c.low} c ${c.close} v ${c.volume})`,
      'format',
    );
  }
  return c;
}
