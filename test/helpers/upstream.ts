/**
 * A fake of every live upstream on 127.0.0.1 (one node:http server per upstream, random ports,
 * so each has its own host for the per-host budget). It serves the bundled dataset in each
 * source's wire format, cut at a settable date, with switchable faults per upstream.
 *
 * The wire values round-trip the CSV values exactly: prices, TVL, fees and counts are the CSV
 * text (strings where the API sends strings, `Number(text)` where it sends numbers); a daily
 * funding mean `m` is served as three 8-hour Binance prints equal to `m`, or 24 hourly
 * Hyperliquid prints of `m / 8`; a Solana day of `V` transactions is served as 1440 one-minute
 * performance samples summing to `V` (only around the fake's current time, like a real node).
 *
 * Data served (only rows dated before `today`): Binance/OKX klines from data/prices/<asset>.csv
 * (HYPE through Hyperliquid), alternative.me from data/fear_greed.csv, funding from
 * data/funding/{btc,eth,sol}_daily.csv (Binance symbols BTCUSDT/ETHUSDT/SOLUSDT; Hyperliquid
 * coins BTC/ETH/SOL; HYPE has no bundled funding, so an empty list), chain metrics from
 * data/chains/{ethereum,solana,hyperliquid}.csv.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { UPSTREAM_NAMES, type UpstreamName } from '../../src/providers/live/source.ts';

const DAY_MS = 86_400_000;

/**
 * A fault of one upstream. 'hang': accept and never answer; 'garbage': 200 with a non-JSON
 * body; 'status': that HTTP status (with `Retry-After` when given); 'destroy': 200 headers and
 * half a body, then the connection is destroyed; 'body': 200 with this exact body (a changed
 * format, an empty page). `times`: the fault applies to that many requests, then clears
 * (default: until replaced).
 */
export interface Fault {
  kind: 'hang' | 'garbage' | 'status' | 'destroy' | 'body';
  status?: number;
  retryAfter?: string;
  body?: string;
  times?: number;
}

/** A running fake upstream. */
export interface Upstream {
  /** Base URL per upstream, for `createLiveSources({ baseUrls })`. */
  baseUrls: Record<UpstreamName, string>;
  /** Serves only days before `d` (YYYY-MM-DD); also sets the Solana clock to `d`T00:00Z. */
  setToday(d: string): void;
  /** Sets the fake's clock (epoch ms) for the Solana RPC, without changing `today`. */
  setNow(ms: number): void;
  /** Sets (or clears, with null) the fault of one upstream. */
  fault(host: UpstreamName, f: Fault | null): void;
  /** Requests received, all upstreams. */
  readonly requests: number;
  /** Requests received per upstream. */
  readonly requestsBy: Record<UpstreamName, number>;
  close(): Promise<void>;
}

interface Csv {
  header: string[];
  rows: string[][];
}

function readCsv(rel: string): Csv {
  const lines = readFileSync(path.join(ROOT_DIR, 'data', rel), 'utf8')
    .split(/\r?\n/)
    .filter((l) => l.length > 0);
  const header = lines.shift()!.split(',');
  return { header, rows: lines.map((l) => l.split(',')) };
}

/** [date, text] of one column, rows with a value only. */
function column(csv: Csv, name: string): [string, string][] {
  const d = csv.header.indexOf('date');
  const i = csv.header.indexOf(name);
  if (i < 0) return [];
  return csv.rows.filter((r) => (r[i] ?? '') !== '').map((r) => [r[d]!, r[i]!]);
}

const ms = (day: string): number => Date.parse(`${day}T00:00:00Z`);

const PRICE_FILES: Record<string, string> = {
  BTC: 'btc',
  ETH: 'eth',
  XRP: 'xrp',
  BNB: 'bnb',
  SOL: 'sol',
  DOGE: 'doge',
  ADA: 'ada',
  LINK: 'link',
  AVAX: 'avax',
  LTC: 'ltc',
  HYPE: 'hype',
};
const FUNDING_FILES: Record<string, string> = { BTC: 'btc_daily', ETH: 'eth_daily', SOL: 'sol_daily' };

interface Data {
  candles: Map<string, { date: string; o: string; h: string; l: string; c: string; v: string; qv: string }[]>;
  fng: { date: string; value: string; cls: string }[];
  funding: Map<string, [string, string][]>;
  chains: Record<'ethereum' | 'solana' | 'hyperliquid', Csv>;
}

let cached: Data | undefined;
function load(): Data {
  if (cached) return cached;
  const candles = new Map<string, Data['candles'] extends Map<string, infer V> ? V : never>();
  for (const [base, file] of Object.entries(PRICE_FILES)) {
    const csv = readCsv(`prices/${file}.csv`);
    const ix = (n: string) => csv.header.indexOf(n);
    candles.set(
      base,
      csv.rows.map((r) => ({
        date: r[ix('date')]!,
        o: r[ix('open')]!,
        h: r[ix('high')]!,
        l: r[ix('low')]!,
        c: r[ix('close')]!,
        v: r[ix('volume')]!,
        qv: r[ix('quote_volume')] ?? '0',
      })),
    );
  }
  const fgCsv = readCsv('fear_greed.csv');
  const fng = fgCsv.rows.map((r) => ({ date: r[0]!, value: r[1]!, cls: r[2]! }));
  const funding = new Map<string, [string, string][]>();
  for (const [base, file] of Object.entries(FUNDING_FILES)) funding.set(base, column(readCsv(`funding/${file}.csv`), 'funding_rate_mean'));
  cached = {
    candles,
    fng,
    funding,
    chains: {
      ethereum: readCsv('chains/ethereum.csv'),
      solana: readCsv('chains/solana.csv'),
      hyperliquid: readCsv('chains/hyperliquid.csv'),
    },
  };
  return cached;
}

/** Solana fake: slot 0 at this instant, 400 ms per slot, one 60 s sample = 150 slots. */
const SLOT_EPOCH_MS = Date.parse('2020-03-16T00:00:00Z');
const SLOT_MS = 400;
const SAMPLE_SECS = 60;

/** Starts the fake upstream (nine servers on 127.0.0.1, random ports). */
export async function startUpstream(): Promise<Upstream> {
  const data = load();
  let today = '2025-10-01';
  let now = ms(today);
  let requests = 0;
  const requestsBy = Object.fromEntries(UPSTREAM_NAMES.map((n) => [n, 0])) as Record<UpstreamName, number>;
  const faults = new Map<UpstreamName, Fault>();
  const before = <T extends { date: string } | [string, string]>(list: T[]): T[] =>
    list.filter((x) => (Array.isArray(x) ? x[0] : x.date) < today);

  const solTx = new Map(column(data.chains.solana, 'transactions').map(([d, v]) => [d, Number(v)]));

  type Reply = { status?: number; body: unknown };
  type Handler = (url: URL, body: unknown) => Reply;

  const binance: Handler = (url) => {
    if (url.pathname !== '/api/v3/klines') return { status: 404, body: { code: -1, msg: 'not found' } };
    const base = url.searchParams.get('symbol')?.replace(/USDT$/, '') ?? '';
    const list = data.candles.get(base);
    if (!list || base === 'HYPE') return { status: 400, body: { code: -1121, msg: 'Invalid symbol.' } };
    const start = Number(url.searchParams.get('startTime') ?? 0);
    const end = Number(url.searchParams.get('endTime') ?? Number.MAX_SAFE_INTEGER);
    const limit = Math.min(Number(url.searchParams.get('limit') ?? 500), 1000);
    return {
      body: before(list)
        .filter((c) => ms(c.date) >= start && ms(c.date) <= end)
        .slice(0, limit)
        .map((c) => [ms(c.date), c.o, c.h, c.l, c.c, c.v, ms(c.date) + DAY_MS - 1, c.qv, 1000, '0', '0', '0']),
    };
  };

  const okx: Handler = (url) => {
    if (url.pathname !== '/api/v5/market/history-candles') return { status: 404, body: { code: '404', msg: 'not found', data: [] } };
    const base = url.searchParams.get('instId')?.replace(/-USDT$/, '') ?? '';
    const list = data.candles.get(base);
    if (!list || base === 'HYPE' || url.searchParams.get('bar') !== '1Dutc')
      return { body: { code: '51001', msg: "Instrument ID doesn't exist.", data: [] } };
    const after = Number(url.searchParams.get('after') ?? Number.MAX_SAFE_INTEGER);
    const limit = Math.min(Number(url.searchParams.get('limit') ?? 100), 100);
    const rows = before(list)
      .filter((c) => ms(c.date) < after)
      .reverse()
      .slice(0, limit)
      .map((c) => [String(ms(c.date)), c.o, c.h, c.l, c.c, c.v, c.qv, c.qv, '1']);
    return { body: { code: '0', msg: '', data: rows } };
  };

  const binanceFutures: Handler = (url) => {
    if (url.pathname === '/fapi/v1/fundingInfo') return { body: [] };
    if (url.pathname !== '/fapi/v1/fundingRate') return { status: 404, body: { code: -1, msg: 'not found' } };
    const symbol = url.searchParams.get('symbol') ?? '';
    const list = data.funding.get(symbol.replace(/USDT$/, '')) ?? [];
    const start = Number(url.searchParams.get('startTime') ?? 0);
    const end = Number(url.searchParams.get('endTime') ?? Number.MAX_SAFE_INTEGER);
    const limit = Math.min(Number(url.searchParams.get('limit') ?? 100), 1000);
    const prints = before(list).flatMap(([d, rate]) =>
      [0, 8, 16].map((h) => ({ symbol, fundingTime: ms(d) + h * 3_600_000, fundingRate: rate, markPrice: '' })),
    );
    return { body: prints.filter((p) => p.fundingTime >= start && p.fundingTime <= end).slice(0, limit) };
  };

  const hyperliquid: Handler = (url, req) => {
    const r = req as {
      type?: string;
      coin?: string;
      startTime?: number;
      endTime?: number;
      req?: { coin: string; interval: string; startTime: number; endTime: number };
    };
    if (url.pathname !== '/info' || !r || typeof r !== 'object') return { status: 422, body: 'Failed to deserialize the JSON body' };
    if (r.type === 'candleSnapshot' && r.req) {
      const list = r.req.coin === 'HYPE' ? data.candles.get('HYPE')! : [];
      return {
        body: before(list)
          .filter((c) => ms(c.date) >= r.req!.startTime && ms(c.date) <= r.req!.endTime)
          .slice(-5000)
          .map((c) => ({
            t: ms(c.date),
            T: ms(c.date) + DAY_MS - 1,
            s: r.req!.coin,
            i: r.req!.interval,
            o: c.o,
            c: c.c,
            h: c.h,
            l: c.l,
            v: c.v,
            n: 1000,
          })),
      };
    }
    if (r.type === 'fundingHistory' && typeof r.coin === 'string') {
      const list = data.funding.get(r.coin) ?? [];
      const start = r.startTime ?? 0;
      const end = r.endTime ?? Number.MAX_SAFE_INTEGER;
      const prints = before(list).flatMap(([d, rate]) =>
        Array.from({ length: 24 }, (_, h) => ({
          coin: r.coin!,
          fundingRate: String(Number(rate) / 8),
          premium: '0.0',
          time: ms(d) + h * 3_600_000,
        })),
      );
      return { body: prints.filter((p) => p.time >= start && p.time <= end).slice(0, 500) };
    }
    return { status: 422, body: 'Failed to deserialize the JSON body' };
  };

  const alternativeMe: Handler = (url) => {
    if (url.pathname !== '/fng/') return { status: 404, body: 'not found' };
    const limit = Number(url.searchParams.get('limit') ?? 1);
    const rows = before(data.fng)
      .reverse()
      .map((x) => ({ value: x.value, value_classification: x.cls, timestamp: String(ms(x.date) / 1000) }));
    return { body: { name: 'Fear and Greed Index', data: limit === 0 ? rows : rows.slice(0, limit), metadata: { error: null } } };
  };

  const defillama: Handler = (url) => {
    const p = decodeURIComponent(url.pathname);
    const secs = (d: string) => ms(d) / 1000;
    if (p === '/v2/historicalChainTvl/Ethereum' || p === '/v2/historicalChainTvl/Solana') {
      const csv = p.endsWith('Ethereum') ? data.chains.ethereum : data.chains.solana;
      return { body: before(column(csv, 'tvl')).map(([d, v]) => ({ date: secs(d), tvl: Number(v) })) };
    }
    if (p === '/protocol/hyperliquid') {
      const tvl = before(column(data.chains.hyperliquid, 'tvl_protocol_defillama')).map(([d, v]) => ({
        date: secs(d),
        totalLiquidityUSD: Number(v),
      }));
      return { body: { id: 'parent#hyperliquid', name: 'Hyperliquid', chainTvls: {}, tvl } };
    }
    if (p === '/summary/fees/hyperliquid') {
      const chart = before(column(data.chains.hyperliquid, 'fees')).map(([d, v]) => [secs(d), Number(v)]);
      return { body: { id: 'parent#hyperliquid', name: 'Hyperliquid', totalDataChart: chart, totalDataChartBreakdown: [] } };
    }
    return { status: 404, body: { message: 'not found' } };
  };

  const growthepie: Handler = (url) => {
    if (url.pathname !== '/v1/fundamentals.json') return { status: 404, body: 'not found' };
    const rows = [
      ...before(column(data.chains.ethereum, 'active_addresses')).map(([d, v]) => ({
        metric_key: 'daa',
        origin_key: 'ethereum',
        date: d,
        value: Number(v),
      })),
      ...before(column(data.chains.ethereum, 'transactions')).map(([d, v]) => ({
        metric_key: 'txcount',
        origin_key: 'ethereum',
        date: d,
        value: Number(v),
      })),
    ];
    return { body: rows };
  };

  const STATS: Record<string, [string, string]> = {
    daily_usd_volume: ['dex_volume', 'daily_usd_volume'],
    daily_unique_users: ['active_addresses', 'daily_unique_users'],
    daily_inflow: ['net_inflow_usd', 'inflow'],
  };
  const hyperliquidStats: Handler = (url) => {
    const m = /^\/Mainnet\/(\w+)$/.exec(url.pathname);
    const spec = m ? STATS[m[1]!] : undefined;
    if (!spec) return { status: 404, body: 'not found' };
    return {
      body: {
        chart_data: before(column(data.chains.hyperliquid, spec[0])).map(([d, v]) => ({ time: `${d}T00:00:00`, [spec[1]]: Number(v) })),
      },
    };
  };

  const solanaRpc: Handler = (_url, req) => {
    const r = req as { id?: unknown; method?: string; params?: unknown[] };
    const id = r?.id ?? null;
    if (r?.method === 'getRecentPerformanceSamples') {
      const limit = Math.min(Number(r.params?.[0] ?? 720), 720);
      const out = [];
      // Samples end on whole minutes up to `now` (not `today`: the node serves the current day),
      // newest first, while their day has a value in the bundled data.
      let end = Math.floor(now / 60_000) * 60_000;
      for (let k = 0; k < limit; k++, end -= 60_000) {
        const start = end - SAMPLE_SECS * 1000;
        const day = new Date(start).toISOString().slice(0, 10);
        const v = solTx.get(day);
        if (v === undefined || start < SLOT_EPOCH_MS) break; // the node has no samples before a gap
        const minute = (start - ms(day)) / 60_000;
        const tx = Math.floor(v! / 1440) + (minute < v! % 1440 ? 1 : 0);
        out.push({
          slot: (end - SLOT_EPOCH_MS) / SLOT_MS,
          numTransactions: tx,
          numSlots: (SAMPLE_SECS * 1000) / SLOT_MS,
          samplePeriodSecs: SAMPLE_SECS,
          numNonVoteTransactions: 0,
        });
      }
      return { body: { jsonrpc: '2.0', result: out, id } };
    }
    if (r?.method === 'getBlockTime') {
      const slot = Number(r.params?.[0]);
      return { body: { jsonrpc: '2.0', result: Math.floor((SLOT_EPOCH_MS + slot * SLOT_MS) / 1000), id } };
    }
    return { body: { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id } };
  };

  const handlers: Record<UpstreamName, Handler> = {
    binance,
    binanceFutures,
    okx,
    hyperliquid,
    alternativeMe,
    defillama,
    growthepie,
    hyperliquidStats,
    solanaRpc,
  };
  const servers: http.Server[] = [];
  const baseUrls = {} as Record<UpstreamName, string>;

  for (const name of UPSTREAM_NAMES) {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        requests++;
        requestsBy[name]++;
        const f = faults.get(name);
        if (f) {
          if (f.times !== undefined && --f.times <= 0) faults.delete(name);
          if (f.kind === 'hang') return; // never answers; close() destroys the socket
          if (f.kind === 'garbage') {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('<html>\x00\x01 upstream maintenance');
            return;
          }
          if (f.kind === 'status') {
            res.writeHead(f.status ?? 500, {
              'content-type': 'application/json',
              ...(f.retryAfter !== undefined ? { 'retry-after': f.retryAfter } : {}),
            });
            res.end(JSON.stringify({ error: `fault ${f.status ?? 500}` }));
            return;
          }
          if (f.kind === 'body') {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(f.body ?? '');
            return;
          }
          if (f.kind === 'destroy') {
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
            res.write('[[1748736000000,"104591.88"');
            setTimeout(() => res.destroy(), 10);
            return;
          }
        }
        let body: unknown = undefined;
        if (chunks.length) {
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            body = null;
          }
        }
        const url = new URL(req.url ?? '/', 'http://127.0.0.1');
        const reply = handlers[name](url, body);
        const text = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
        res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
        res.end(text);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    baseUrls[name] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  return {
    baseUrls,
    setToday(d: string) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(d)) throw new RangeError(`bad day ${d}`);
      today = d;
      now = ms(d);
    },
    setNow(t: number) {
      now = t;
    },
    fault(host: UpstreamName, f: Fault | null) {
      if (f) faults.set(host, { ...f });
      else faults.delete(host);
    },
    get requests() {
      return requests;
    },
    get requestsBy() {
      return { ...requestsBy };
    },
    async close() {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
