/**
 * Binance adapters: spot daily candles (`GET /api/v3/klines`, with the OKX
 * `/api/v5/market/history-candles` fallback when Binance refuses the region with 451/403) and
 * USD-M funding (`GET /fapi/v1/fundingRate`, interval from `GET /fapi/v1/fundingInfo`).
 * Formats: Binance Spot REST "Kline/Candlestick data", USD-M "Get Funding Rate History" and
 * "Get Funding Rate Info"; OKX v5 "Get candlesticks history". docs/live-data.md.
 */
import { z } from 'zod';
import type { Candle } from '../../engine/types.ts';
import {
  DAY_MS,
  MAX_PAGES,
  checkWindow,
  addPrint,
  completeDays,
  dailyFundingMeans,
  dayOfMs,
  dayStartMs,
  checkCandle,
  decimalString,
  finite,
  type AdapterContext,
} from './days.ts';
import { UpstreamError, type FundingDay, type LiveSource, type SeriesPoints } from './source.ts';

const KLINES_LIMIT = 1000;
/** Binance kline: [openTime, open, high, low, close, volume, closeTime, quoteVolume, trades, ...]. */
const klineSchema = z.array(
  z
    .tuple([z.number().int(), decimalString, decimalString, decimalString, decimalString, decimalString, z.number().int()])
    .rest(z.unknown()),
);

const OKX_LIMIT = 100;
/** OKX candle: [ts, o, h, l, c, vol (base ccy for SPOT), volCcy, volCcyQuote, confirm]. */
const okxSchema = z.object({
  code: z.string(),
  msg: z.string(),
  data: z.array(
    z
      .tuple([
        z.string().regex(/^\d+$/).transform(Number),
        decimalString,
        decimalString,
        decimalString,
        decimalString,
        decimalString,
        z.string(),
        z.string(),
        z.enum(['0', '1']),
      ])
      .rest(z.unknown()),
  ),
});

function host(url: string): string {
  return new URL(url).host;
}

function notMidnight(source: string, path: string, field: string, ms: number): UpstreamError {
  return new UpstreamError(source, `${source}: ${path}: unexpected response format at field ${field}: ${ms} is not 00:00 UTC`, 'format');
}

/**
 * Daily spot candles of one asset from Binance (`symbol`, e.g. BTCUSDT), falling back to OKX
 * (`okxInstId`, e.g. BTC-USDT, `bar=1Dutc`, confirmed candles only) on HTTP 451/403.
 * `volume` is the base-asset volume. The returned `source` names the venue that answered.
 */
export function binanceCandles(ctx: AdapterContext, asset: string, symbol: string, okxInstId: string): LiveSource {
  const base = ctx.baseUrls.binance;
  const source = `Binance spot /api/v3/klines ${symbol} 1d`;
  const okxSource = `OKX spot /api/v5/market/history-candles ${okxInstId} 1Dutc (fallback: Binance refused the region)`;

  async function fromBinance(after: string, today: string, signal?: AbortSignal): Promise<Candle[]> {
    const out: Candle[] = [];
    let start = dayStartMs(after) + DAY_MS;
    const end = dayStartMs(today) - 1;
    for (let page = 0; page < MAX_PAGES && start <= end; page++) {
      const url = `${base}/api/v3/klines?symbol=${symbol}&interval=1d&startTime=${start}&endTime=${end}&limit=${KLINES_LIMIT}`;
      const rows = await ctx.http.json({ source, url, schema: klineSchema, signal });
      rows.forEach((r, i) => {
        if (r[0] % DAY_MS !== 0) throw notMidnight(source, '/api/v3/klines', `[${i}][0]`, r[0]);
        // A candle still open at the time of the call (closeTime in the future) is never complete.
        if (r[6] >= Date.now()) return;
        out.push(
          checkCandle(source, '/api/v3/klines', `[${i}]`, {
            date: dayOfMs(r[0]),
            open: r[1],
            high: r[2],
            low: r[3],
            close: r[4],
            volume: r[5],
          }),
        );
      });
      if (rows.length < KLINES_LIMIT) break;
      const next = rows.at(-1)![0] + DAY_MS;
      if (next <= start) break;
      start = next;
    }
    return out;
  }

  async function fromOkx(after: string, today: string, signal?: AbortSignal): Promise<Candle[]> {
    const out: Candle[] = [];
    const stop = dayStartMs(after);
    let cursor = dayStartMs(today);
    for (let page = 0; page < MAX_PAGES; page++) {
      const url = `${ctx.baseUrls.okx}/api/v5/market/history-candles?instId=${okxInstId}&bar=1Dutc&after=${cursor}&limit=${OKX_LIMIT}`;
      const body = await ctx.http.json({ source: okxSource, url, schema: okxSchema, signal });
      if (body.code !== '0')
        throw new UpstreamError(okxSource, `${okxSource}: /api/v5/market/history-candles: OKX error ${body.code} ${body.msg}`, 'http');
      if (body.data.length === 0) break;
      body.data.forEach((r, i) => {
        if (r[0] % DAY_MS !== 0) throw notMidnight(okxSource, '/api/v5/market/history-candles', `data[${i}][0]`, r[0]);
        if (r[8] !== '1') return; // not confirmed: the day is not complete
        out.push(
          checkCandle(okxSource, '/api/v5/market/history-candles', `data[${i}]`, {
            date: dayOfMs(r[0]),
            open: r[1],
            high: r[2],
            low: r[3],
            close: r[4],
            volume: r[5],
          }),
        );
      });
      const oldest = Math.min(...body.data.map((r) => r[0]));
      if (oldest <= stop || oldest >= cursor) break;
      cursor = oldest;
    }
    return out;
  }

  return {
    series: `candles:${asset}`,
    kind: 'candles',
    asset,
    chain: null,
    metric: null,
    host: host(base),
    source,
    cadenceHours: 24,
    schedule: '7 * * * *',
    async fetch(after: string, today: string, signal?: AbortSignal): Promise<SeriesPoints> {
      checkWindow(after, today);
      try {
        const points = completeDays(source, '/api/v3/klines', await fromBinance(after, today, signal), after, today);
        return { kind: 'candles', points, source };
      } catch (e) {
        if (!(e instanceof UpstreamError) || (e.status !== 451 && e.status !== 403)) throw e;
        const points = completeDays(okxSource, '/api/v5/market/history-candles', await fromOkx(after, today, signal), after, today);
        return { kind: 'candles', points, source: okxSource };
      }
    },
  };
}

const FUNDING_LIMIT = 1000;
const fundingRateSchema = z.array(
  z.object({ symbol: z.string(), fundingTime: z.number().int(), fundingRate: decimalString, markPrice: z.string().optional() }),
);
const fundingInfoSchema = z.array(
  z.object({ symbol: z.string(), fundingIntervalHours: finite.refine((h) => h > 0 && 24 % h === 0, 'not a divisor of 24 hours') }),
);

/**
 * Daily funding means of one Binance USD-M perpetual (`symbol`, e.g. BTCUSDT). The funding
 * interval comes from `/fapi/v1/fundingInfo` (symbols absent there settle every 8 hours);
 * every print is normalised to per 8 hours before the daily mean.
 */
export function binanceFunding(ctx: AdapterContext, asset: string, symbol: string): LiveSource {
  const base = ctx.baseUrls.binanceFutures;
  const source = `Binance USD-M /fapi/v1/fundingRate ${symbol} (daily mean, per 8 h)`;
  return {
    series: `funding:${asset}`,
    kind: 'funding',
    asset,
    chain: null,
    metric: null,
    host: host(base),
    source,
    cadenceHours: 24,
    schedule: '15 * * * *',
    async fetch(after: string, today: string, signal?: AbortSignal): Promise<SeriesPoints> {
      checkWindow(after, today);
      const info = await ctx.http.json({ source, url: `${base}/fapi/v1/fundingInfo`, schema: fundingInfoSchema, signal });
      const interval = info.find((x) => x.symbol === symbol)?.fundingIntervalHours ?? 8;
      const prints = new Map<number, number>();
      let start = dayStartMs(after) + DAY_MS;
      const end = dayStartMs(today) - 1;
      for (let page = 0; page < MAX_PAGES && start <= end; page++) {
        const url = `${base}/fapi/v1/fundingRate?symbol=${symbol}&startTime=${start}&endTime=${end}&limit=${FUNDING_LIMIT}`;
        const rows = await ctx.http.json({ source, url, schema: fundingRateSchema, signal });
        rows.forEach((r, i) => {
          if (r.symbol !== symbol) {
            throw new UpstreamError(
              source,
              `${source}: /fapi/v1/fundingRate: unexpected response format at field [${i}].symbol: ${r.symbol}`,
              'format',
            );
          }
          addPrint(prints, source, '/fapi/v1/fundingRate', `[${i}].fundingRate`, r.fundingTime, r.fundingRate);
        });
        if (rows.length < FUNDING_LIMIT) break;
        const next = Math.max(...rows.map((r) => r.fundingTime)) + 1;
        if (next <= start) break;
        start = next;
      }
      const days: FundingDay[] = dailyFundingMeans(
        [...prints.entries()].sort((a, b) => a[0] - b[0]).map(([ms, rate]) => ({ ms, rate, intervalHours: interval })),
      );
      return { kind: 'funding', points: completeDays(source, '/fapi/v1/fundingRate', days, after, today), source };
    },
  };
}
