/**
 * Hyperliquid adapters: HYPE daily candles (`POST /info {"type":"candleSnapshot"}`), HYPE
 * hourly funding (`POST /info {"type":"fundingHistory"}`) and the stats feed behind
 * stats.hyperliquid.xyz (`GET /Mainnet/<metric>`: `{"chart_data":[{"time":"YYYY-MM-DDT00:00:00", <field>: n}]}`).
 * Formats: Hyperliquid API docs "Info endpoint" (candle snapshot, historical funding rates);
 * recorded responses in data/fixtures/hyperliquid. docs/live-data.md.
 */
import { z } from 'zod';
import type { ChainId, MetricPoint } from '../../engine/types.ts';
import {
  DAY_MS,
  MAX_PAGES,
  checkWindow,
  addPrint,
  completeDays,
  dailyFundingMeans,
  dailyMetricSource,
  dayOfMs,
  dayStartMs,
  checkCandle,
  decimalString,
  finite,
  type AdapterContext,
} from './days.ts';
import { isCalendarDay } from '../../engine/util.ts';
import { UpstreamError, type LiveSource, type SeriesPoints } from './source.ts';

/** Hyperliquid returns at most the 5000 most recent candles per request. */
const CANDLE_CAP = 5000;
const candleSchema = z.array(
  z.object({
    t: z.number().int(),
    T: z.number().int(),
    s: z.string(),
    i: z.string(),
    o: decimalString,
    h: decimalString,
    l: decimalString,
    c: decimalString,
    v: decimalString,
    n: z.number().int(),
  }),
);
const fundingSchema = z.array(
  z.object({ coin: z.string(), fundingRate: decimalString, premium: decimalString.optional(), time: z.number().int() }),
);

/** Daily candles of a Hyperliquid perpetual (`coin`, e.g. HYPE); volume in base units. */
export function hyperliquidCandles(ctx: AdapterContext, asset: string, coin: string): LiveSource {
  const base = ctx.baseUrls.hyperliquid;
  const source = `Hyperliquid /info candleSnapshot ${coin} 1d (perp)`;
  return {
    series: `candles:${asset}`,
    kind: 'candles',
    asset,
    chain: null,
    metric: null,
    host: new URL(base).host,
    source,
    cadenceHours: 24,
    schedule: '7 * * * *',
    async fetch(after: string, today: string, signal?: AbortSignal): Promise<SeriesPoints> {
      checkWindow(after, today);
      const points = [];
      let start = dayStartMs(after) + DAY_MS;
      const end = dayStartMs(today) - 1;
      for (let page = 0; page < MAX_PAGES && start <= end; page++) {
        const body = { type: 'candleSnapshot', req: { coin, interval: '1d', startTime: start, endTime: end } };
        const rows = await ctx.http.json({ source, url: `${base}/info`, method: 'POST', body, schema: candleSchema, signal });
        for (const [i, r] of rows.entries()) {
          if (r.t % DAY_MS !== 0)
            throw new UpstreamError(
              source,
              `${source}: /info: unexpected response format at field [${i}].t: ${r.t} is not 00:00 UTC`,
              'format',
            );
          if (r.s !== coin || r.i !== '1d')
            throw new UpstreamError(source, `${source}: /info: unexpected response format at field [${i}].s/i: ${r.s} ${r.i}`, 'format');
          if (r.T >= Date.now()) continue; // still open
          points.push(
            checkCandle(source, '/info', `[${i}]`, { date: dayOfMs(r.t), open: r.o, high: r.h, low: r.l, close: r.c, volume: r.v }),
          );
        }
        if (rows.length < CANDLE_CAP) break;
        const next = Math.max(...rows.map((r) => r.t)) + DAY_MS;
        if (next <= start) break;
        start = next;
      }
      return { kind: 'candles', points: completeDays(source, '/info candleSnapshot', points, after, today), source };
    },
  };
}

/**
 * Hyperliquid settled funding every 8 hours until 2023-06-08T00:00Z and every hour after
 * (seen in the recorded BTC history, data/fixtures/hyperliquid/info_fundingHistory_BTC.json).
 */
export const HOURLY_SINCE_MS = Date.parse('2023-06-08T00:30:00Z');

/**
 * Daily funding means of a Hyperliquid perpetual. Hyperliquid settles every hour and
 * `fundingRate` is the hourly fraction, so the per-8-hour value is `rate × 8` (prints before
 * {@link HOURLY_SINCE_MS} are 8-hourly and kept as they are); a day normally has 24 prints. Pages (500 prints each upstream) are followed from the last print's time + 1.
 */
export function hyperliquidFunding(ctx: AdapterContext, asset: string, coin: string): LiveSource {
  const base = ctx.baseUrls.hyperliquid;
  const source = `Hyperliquid /info fundingHistory ${coin} (hourly × 8, daily mean, per 8 h)`;
  return {
    series: `funding:${asset}`,
    kind: 'funding',
    asset,
    chain: null,
    metric: null,
    host: new URL(base).host,
    source,
    cadenceHours: 24,
    schedule: '15 * * * *',
    async fetch(after: string, today: string, signal?: AbortSignal): Promise<SeriesPoints> {
      checkWindow(after, today);
      const prints = new Map<number, number>();
      let start = dayStartMs(after) + DAY_MS;
      const end = dayStartMs(today) - 1;
      for (let page = 0; page < MAX_PAGES && start <= end; page++) {
        const body = { type: 'fundingHistory', coin, startTime: start, endTime: end };
        const rows = await ctx.http.json({ source, url: `${base}/info`, method: 'POST', body, schema: fundingSchema, signal });
        if (rows.length === 0) break;
        for (const [i, r] of rows.entries()) {
          if (r.coin !== coin)
            throw new UpstreamError(source, `${source}: /info: unexpected response format at field [${i}].coin: ${r.coin}`, 'format');
          if (r.time <= end) addPrint(prints, source, '/info', `[${i}].fundingRate`, r.time, r.fundingRate);
        }
        const next = Math.max(...rows.map((r) => r.time)) + 1;
        if (next <= start) break;
        start = next;
      }
      const days = dailyFundingMeans(
        [...prints.entries()].sort((a, b) => a[0] - b[0]).map(([ms, rate]) => ({ ms, rate, intervalHours: ms < HOURLY_SINCE_MS ? 8 : 1 })),
      );
      return { kind: 'funding', points: completeDays(source, '/info fundingHistory', days, after, today), source };
    },
  };
}

/** A metric of the Hyperliquid stats feed: path under /Mainnet/ and the value field of `chart_data[]`. */
export function hyperliquidStat(
  ctx: AdapterContext,
  chain: ChainId,
  metric: string,
  path: string,
  field: string,
  what: string,
): LiveSource {
  const base = ctx.baseUrls.hyperliquidStats;
  const source = `Hyperliquid stats /Mainnet/${path} (${what})`;
  const row = z.object({
    time: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}T00:00:00(\.0+)?Z?$/, 'expected YYYY-MM-DDT00:00:00')
      .refine((t) => isCalendarDay(t.slice(0, 10)), 'not a day of the calendar'),
    [field]: finite,
  }) as unknown as z.ZodType<{
    time: string;
    [k: string]: unknown;
  }>;
  const schema = z.object({ chart_data: z.array(row) });
  return dailyMetricSource({
    chain,
    metric,
    base,
    source,
    schedule: '25 */2 * * *',
    async points(after, today, signal) {
      const body = await ctx.http.json({ source, url: `${base}/Mainnet/${path}`, schema, signal });
      const points: MetricPoint[] = body.chart_data.map((r) => ({ date: r.time.slice(0, 10), value: r[field] as number }));
      return completeDays(source, `/Mainnet/${path}`, points, after, today);
    },
  });
}
