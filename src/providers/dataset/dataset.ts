import { createHash } from 'node:crypto';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Candle, ChainId, FearGreedPoint, FundingPoint, MetricPoint, SourcedPoints } from '../../engine/types.ts';
import { addDays, daysBetween } from '../../engine/util.ts';
import { ASSETS } from '../assets.ts';
import {
  DataValidationError,
  type DataGap,
  type MarketData,
  type MarketDataProvider,
  type MetricSeries,
  type SeriesExport,
  type SeriesFreshness,
} from '../port.ts';

const FEAR_GREED_SOURCE = 'data/fear_greed.csv (alternative.me Crypto Fear & Greed Index)';
const ISO_DAY = /^\d{4}-\d{2}-\d{2}$/;

/** Price file per canonical asset id (data/prices/<file>.csv). */
const PRICE_FILES: Record<string, string> = {
  bitcoin: 'btc',
  ethereum: 'eth',
  solana: 'sol',
  hyperliquid: 'hype',
  binancecoin: 'bnb',
  ripple: 'xrp',
  dogecoin: 'doge',
  cardano: 'ada',
  'avalanche-2': 'avax',
  chainlink: 'link',
  litecoin: 'ltc',
};

/**
 * Daily funding files per asset (Binance USDT-M, daily mean of the 8 h prints, fraction per
 * 8 h). HYPE's Binance (4 h) and Hyperliquid (1 h) files hold no rows in this copy, and the
 * other assets have none, so they have no funding factor.
 */
const FUNDING_FILES: Record<string, string> = {
  bitcoin: 'btc_daily',
  ethereum: 'eth_daily',
  solana: 'sol_daily',
};

/** Chain metric files and the provenance of each column used (see data/SOURCES.md section 4). */
const CHAIN_FILES: Record<ChainId, { file: string; sources: Record<string, string> }> = {
  eth: {
    file: 'ethereum',
    sources: {
      tvl: 'DefiLlama chain TVL (USD)',
      transactions: 'Etherscan daily transactions',
      active_addresses: 'Etherscan daily active addresses',
      gas_used: 'Etherscan daily gas used',
      avg_gas_price_gwei: 'Etherscan daily average gas price (gwei)',
      fees_usd_etherscan_derived: 'Etherscan transactions x average fee (USD, derived)',
      dex_volume: 'not found in any public source searched',
      fees: 'not found in any public source searched',
      revenue: 'not found in any public source searched',
    },
  },
  sol: {
    file: 'solana',
    sources: {
      tvl: 'DefiLlama chain TVL (USD)',
      transactions: 'Google BigQuery Solana dataset, all transactions incl. votes',
      fees_usd_derived_flipside_x_binance_close: 'Flipside SOL fees (incl. votes) x Binance close (USD, derived)',
      dex_volume: 'not found in any public source searched',
      fees: 'not found in any public source searched',
      revenue: 'not found in any public source searched',
      active_addresses: 'not found in any public source searched',
    },
  },
  hype: {
    file: 'hyperliquid',
    sources: {
      tvl_protocol_defillama: 'DefiLlama protocol TVL of Hyperliquid (USD)',
      dex_volume: 'Hyperliquid stats daily_usd_volume (USD, perp-dominated)',
      fees: 'DefiLlama /summary/fees/hyperliquid (USD)',
      active_addresses: 'Hyperliquid stats daily_unique_users',
      new_users: 'Hyperliquid stats cumulative_new_users (daily new)',
      net_inflow_usd: 'Hyperliquid stats daily_inflow (net USDC bridge inflow)',
      liquidated_notional_usd: 'Hyperliquid stats daily_notional_liquidated_total (USD)',
      spot_volume_usd_artemis: 'Artemis Hyperliquid spot trading volume (USD)',
      tvl: 'not found in any public source searched (Hyperliquid L1 chain TVL)',
      revenue: 'not found in any public source searched',
      transactions: 'not found in any public source searched',
    },
  },
};

/**
 * Chain-metric values that data/SOURCES.md calls incomplete, left out at load as gaps: served,
 * they would read as real (HYPE's liquidations as 0 USD, a −100 % week). The store's readers
 * name each in the metric's served `source` (buildMarketData). A value SOURCES.md only says
 * "may be partial" is kept.
 */
const INCOMPLETE_POINTS: readonly { chain: ChainId; metric: string; date: string; value: number; note: string }[] = [
  { chain: 'hype', metric: 'liquidated_notional_usd', date: '2025-04-23', value: 0, note: 'the last value (0) is probably incomplete' },
];

/**
 * The bundled values of one chain metric that are left out as incomplete (INCOMPLETE_POINTS),
 * for the loader and for the store's readers (a store imported before this list keeps the
 * row, since stored rows are never rewritten): `has(date, value)` says whether a bundled row
 * is the one left out (the day and the value: a corrected file's real value is kept), `note(day)`
 * is the text to add to the metric's source for data cut at `day` ('' when nothing left out
 * falls on or before it), and `any` whether the metric has such a point at all.
 */
export function incompleteBundled(
  chain: string,
  metric: string,
): { any: boolean; has(date: string, value: number): boolean; note(day: string): string } {
  const left = INCOMPLETE_POINTS.filter((p) => p.chain === chain && p.metric === metric);
  return {
    any: left.length > 0,
    has: (date, value) => left.some((p) => p.date === date && p.value === value),
    note: (day) =>
      left
        .filter((p) => p.date <= day)
        .map((p) => `, without ${p.date} (data/SOURCES.md: ${p.note})`)
        .join(''),
  };
}

interface Csv {
  file: string;
  header: string[];
  rows: string[][];
}

async function readCsv(file: string): Promise<Csv> {
  const text = await readFile(file, 'utf8');
  const lines = text.split(/\r?\n/).filter((l) => l.length > 0);
  const header = (lines.shift() ?? '').split(',');
  return { file, header, rows: lines.map((l) => l.split(',')) };
}

function col(csv: Csv, name: string): number {
  const i = csv.header.indexOf(name);
  if (i < 0) throw new DataValidationError(`${csv.file}: missing column '${name}'`);
  return i;
}

function num(csv: Csv, row: number, value: string | undefined, column: string): number {
  const n = Number(value);
  if (value === undefined || value === '' || !Number.isFinite(n)) {
    throw new DataValidationError(`${csv.file} line ${row + 2}: ${column} '${value}' is not a finite number`);
  }
  return n;
}

function optNum(csv: Csv, row: number, value: string | undefined, column: string): number | null {
  return value === undefined || value === '' ? null : num(csv, row, value, column);
}

function checkDates(csv: Csv, dates: string[]): void {
  for (let i = 0; i < dates.length; i++) {
    const d = dates[i]!;
    if (!ISO_DAY.test(d)) throw new DataValidationError(`${csv.file} line ${i + 2}: date '${d}' is not YYYY-MM-DD`);
    if (i > 0 && d <= dates[i - 1]!) {
      throw new DataValidationError(`${csv.file} line ${i + 2}: date ${d} does not increase (after ${dates[i - 1]})`);
    }
  }
}

/** Finds the missing calendar days in an increasing list of dates. */
export function findGaps(series: string, dates: readonly string[]): DataGap[] {
  const gaps: DataGap[] = [];
  for (let i = 1; i < dates.length; i++) {
    const gap = daysBetween(dates[i - 1]!, dates[i]!) - 1;
    if (gap > 0) gaps.push({ series, from: addDays(dates[i - 1]!, 1), to: addDays(dates[i]!, -1), days: gap });
  }
  return gaps;
}

/** The full, validated dataset before the as-of cut. */
interface FullData {
  candles: Map<string, Candle[]>;
  priceSources: Map<string, string>;
  fearGreed: FearGreedPoint[];
  funding: Map<string, FundingPoint[]>;
  fundingSources: Map<string, string>;
  chains: Map<ChainId, Record<string, MetricSeries>>;
  gaps: DataGap[];
  firstDate: string;
  latestDate: string;
  /** Venue of each candle (the CSV's `source` column), parallel to `candles`. */
  candleVenues: Map<string, string[]>;
  /** Source of each Fear & Greed row, parallel to `fearGreed`. */
  fearGreedRowSources: string[];
}

async function loadFull(dir: string): Promise<FullData> {
  const candles = new Map<string, Candle[]>();
  const priceSources = new Map<string, string>();
  const gaps: DataGap[] = [];
  const candleVenues = new Map<string, string[]>();
  let latest = '0000-00-00';
  let first = '9999-99-99';
  await Promise.all(
    ASSETS.map(async ({ asset }) => {
      const rel = `prices/${PRICE_FILES[asset]}.csv`;
      const csv = await readCsv(path.join(dir, rel));
      const [d, o, h, l, c, v, s] = ['date', 'open', 'high', 'low', 'close', 'volume', 'source'].map((n) => col(csv, n)) as number[];
      const list: Candle[] = csv.rows.map((r, i) => ({
        date: r[d!]!,
        open: num(csv, i, r[o!], 'open'),
        high: num(csv, i, r[h!], 'high'),
        low: num(csv, i, r[l!], 'low'),
        close: num(csv, i, r[c!], 'close'),
        volume: optNum(csv, i, r[v!], 'volume'),
      }));
      checkDates(
        csv,
        list.map((x) => x.date),
      );
      list.forEach((x, i) => {
        if (x.close <= 0 || x.low <= 0) throw new DataValidationError(`${rel} line ${i + 2}: non-positive price`);
      });
      const venues = [...new Set(csv.rows.map((r) => r[s!]))].join(', ');
      candleVenues.set(
        asset,
        csv.rows.map((r) => r[s!] ?? ''),
      );
      candles.set(asset, list);
      priceSources.set(asset, `data/${rel} (daily close, ${venues})`);
      gaps.push(
        ...findGaps(
          `prices/${asset}`,
          list.map((x) => x.date),
        ),
      );
    }),
  );
  for (const list of candles.values()) {
    if (list.length) {
      if (list.at(-1)!.date > latest) latest = list.at(-1)!.date;
      if (list[0]!.date < first) first = list[0]!.date;
    }
  }

  const fgCsv = await readCsv(path.join(dir, 'fear_greed.csv'));
  const fgSourceIdx = fgCsv.header.indexOf('source');
  const fearGreedRowSources = fgCsv.rows.map((r) => (fgSourceIdx >= 0 && r[fgSourceIdx] ? r[fgSourceIdx]! : 'alternative.me'));
  const [fd, fv, fc] = ['date', 'value', 'classification'].map((n) => col(fgCsv, n)) as number[];
  const fearGreed = fgCsv.rows.map((r, i) => {
    const value = num(fgCsv, i, r[fv!], 'value');
    if (value < 0 || value > 100) throw new DataValidationError(`fear_greed.csv line ${i + 2}: value ${value} outside 0..100`);
    return { date: r[fd!]!, value, classification: r[fc!] ?? '' };
  });
  checkDates(
    fgCsv,
    fearGreed.map((x) => x.date),
  );
  gaps.push(
    ...findGaps(
      'fear_greed',
      fearGreed.map((x) => x.date),
    ),
  );

  const funding = new Map<string, FundingPoint[]>();
  const fundingSources = new Map<string, string>();
  for (const [asset, file] of Object.entries(FUNDING_FILES)) {
    const csv = await readCsv(path.join(dir, `funding/${file}.csv`));
    const [d, m] = ['date', 'funding_rate_mean'].map((n) => col(csv, n)) as number[];
    const list = csv.rows.map((r, i) => ({ date: r[d!]!, rate: num(csv, i, r[m!], 'funding_rate_mean') }));
    checkDates(
      csv,
      list.map((x) => x.date),
    );
    if (list.length === 0) continue;
    funding.set(asset, list);
    fundingSources.set(asset, `data/funding/${file}.csv (Binance USDT-M, daily mean of 8 h prints)`);
    gaps.push(
      ...findGaps(
        `funding/${asset}`,
        list.map((x) => x.date),
      ),
    );
  }

  const chains = new Map<ChainId, Record<string, MetricSeries>>();
  for (const [chain, spec] of Object.entries(CHAIN_FILES) as [ChainId, (typeof CHAIN_FILES)[ChainId]][]) {
    const csv = await readCsv(path.join(dir, `chains/${spec.file}.csv`));
    const dIdx = col(csv, 'date');
    checkDates(
      csv,
      csv.rows.map((r) => r[dIdx]!),
    );
    const series: Record<string, MetricSeries> = {};
    for (const [metric, what] of Object.entries(spec.sources)) {
      const idx = csv.header.indexOf(metric);
      const points: MetricPoint[] = [];
      const left = incompleteBundled(chain, metric);
      if (idx >= 0) {
        csv.rows.forEach((r, i) => {
          const v = optNum(csv, i, r[idx], metric);
          if (v !== null && !left.has(r[dIdx]!, v)) points.push({ date: r[dIdx]!, value: v });
        });
      }
      series[metric] = { points, source: `${what}; data/chains/${spec.file}.csv` };
    }
    chains.set(chain, series);
  }
  return {
    candles,
    priceSources,
    fearGreed,
    funding,
    fundingSources,
    chains,
    gaps,
    firstDate: first,
    latestDate: latest,
    candleVenues,
    fearGreedRowSources,
  };
}

/** The points of an ascending list dated on or before `asOf` (the list itself when all are). */
export function cut<T extends { date: string }>(list: T[], asOf: string): T[] {
  // Lists are sorted by date: binary search for the first element after asOf.
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]!.date <= asOf) lo = mid + 1;
    else hi = mid;
  }
  return lo === list.length ? list : list.slice(0, lo);
}

/** How much of a price file's end `lastLine` reads: a CSV row is under 200 bytes. */
const TAIL_BYTES = 4096;

/**
 * The last non-empty line of the text file at `file` (trailing whitespace dropped), read from
 * its last `TAIL_BYTES` bytes; '' for an empty file. A line longer than that comes back cut at
 * its start (a price row is far shorter; the caller then finds no day and ignores the file).
 * @throws when the file cannot be opened or read.
 */
async function lastLine(file: string): Promise<string> {
  const fh = await open(file, 'r');
  try {
    const { size } = await fh.stat();
    const length = Math.min(size, TAIL_BYTES);
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(length), 0, length, size - length);
    return buffer.toString('utf8', 0, bytesRead).trimEnd().split('\n').at(-1) ?? '';
  } finally {
    await fh.close();
  }
}

/**
 * The bundled real dataset (data/, provenance in data/SOURCES.md) as a provider. Files are
 * read and validated once per instance; each `load(asOf)` returns a view cut at `asOf`.
 */
export class DatasetProvider implements MarketDataProvider {
  readonly name = 'dataset';
  #full: Promise<FullData> | undefined;

  /** @param dir folder holding prices/, funding/, chains/ and fear_greed.csv. */
  constructor(readonly dir: string) {}

  /** Newest date in the dataset (YYYY-MM-DD). */
  async latestDate(): Promise<string> {
    return (await this.#load()).latestDate;
  }

  /**
   * The newest day of the dataset's prices (the day `latestDate` and the AS_OF check go by),
   * read from the last line of each price file (its last `TAIL_BYTES` bytes only): no CSV is
   * parsed or validated, so a start can refuse an AS_OF past the data before the (slow) first
   * import. Null when no file has a row.
   * @throws when a price file cannot be read.
   */
  async newestPriceDay(): Promise<string | null> {
    const days = await Promise.all(
      Object.values(PRICE_FILES).map(async (f) => {
        const last = await lastLine(path.join(this.dir, 'prices', `${f}.csv`));
        const day = last.slice(0, last.indexOf(','));
        return /^\d{4}-\d{2}-\d{2}$/.test(day) ? day : null;
      }),
    );
    return days.reduce<string | null>((m, d) => (d !== null && (m === null || d > m) ? d : m), null);
  }

  #load(): Promise<FullData> {
    this.#full ??= loadFull(this.dir);
    return this.#full;
  }

  /**
   * Fingerprint of the dataset's files (SHA-256 over each file's path and SHA-256), so an
   * import of this dataset can be skipped when it was already imported unchanged. Reads the
   * files' bytes only: a start that skips the import parses no CSV.
   */
  async fingerprint(): Promise<string> {
    const rels = [
      ...Object.values(PRICE_FILES).map((f) => `prices/${f}.csv`),
      'fear_greed.csv',
      ...Object.values(FUNDING_FILES).map((f) => `funding/${f}.csv`),
      ...Object.values(CHAIN_FILES).map((c) => `chains/${c.file}.csv`),
    ].sort((x, y) => x.localeCompare(y));
    const shas = await Promise.all(
      rels.map(async (r) =>
        createHash('sha256')
          .update(await readFile(path.join(this.dir, r)))
          .digest('hex'),
      ),
    );
    const h = createHash('sha256');
    rels.forEach((r, i) => h.update(`${r}:${shas[i]}\n`));
    return h.digest('hex');
  }

  /** Every series of the dataset with all its points and per-row provenance (for the import into the store). */
  async exportSeries(): Promise<SeriesExport[]> {
    return this.#describe(await this.#load()).map(({ spec, rows }) => ({ ...spec, rows: rows() }));
  }

  /**
   * Each series of the dataset: its identity and source, its newest day, and its points with
   * per-row provenance (built only when asked: the import needs them, the freshness list not).
   */
  #describe(full: FullData): { spec: Omit<SeriesExport, 'rows'>; newest: string | null; rows: () => SourcedPoints }[] {
    const spec = (series: string, kind: SeriesExport['kind'], subject: string | null, metric: string | null, source: string) => ({
      series,
      kind,
      subject,
      metric,
      source,
      cadence_hours: 24,
    });
    const out: { spec: Omit<SeriesExport, 'rows'>; newest: string | null; rows: () => SourcedPoints }[] = [];
    for (const [asset, list] of full.candles) {
      const venues = full.candleVenues.get(asset) ?? [];
      const file = `data/prices/${PRICE_FILES[asset]}.csv`;
      out.push({
        spec: spec(`candles:${asset}`, 'candles', asset, null, full.priceSources.get(asset) ?? file),
        newest: list.at(-1)?.date ?? null,
        rows: () => ({ kind: 'candles', points: list.map((c, i) => ({ ...c, source: `${file} (${venues[i] || 'unknown venue'})` })) }),
      });
    }
    out.push({
      spec: spec('fear_greed', 'fear_greed', null, null, FEAR_GREED_SOURCE),
      newest: full.fearGreed.at(-1)?.date ?? null,
      rows: () => ({
        kind: 'fear_greed',
        points: full.fearGreed.map((p, i) => ({ ...p, source: `data/fear_greed.csv (${full.fearGreedRowSources[i]})` })),
      }),
    });
    for (const [asset, list] of full.funding) {
      const source = full.fundingSources.get(asset) ?? 'dataset';
      out.push({
        spec: spec(`funding:${asset}`, 'funding', asset, null, source),
        newest: list.at(-1)?.date ?? null,
        rows: () => ({ kind: 'funding', points: list.map((p) => ({ ...p, interval_hours: 8, prints: null, source })) }),
      });
    }
    for (const [chain, rec] of full.chains) {
      for (const [metric, s] of Object.entries(rec)) {
        out.push({
          spec: spec(`metric:${chain}:${metric}`, 'metric', chain, metric, s.source),
          newest: s.points.at(-1)?.date ?? null,
          rows: () => ({ kind: 'metric', points: s.points.map((p) => ({ ...p, source: s.source })) }),
        });
      }
    }
    return out;
  }

  #seriesMemo: SeriesFreshness[] | undefined;
  #series(full: FullData): SeriesFreshness[] {
    this.#seriesMemo ??= this.#describe(full).map(({ spec, newest }) => ({
      ...spec,
      origin: 'bundled' as const,
      newest_date: newest,
      last_success_at: null,
      last_error: null,
      last_error_at: null,
    }));
    return this.#seriesMemo;
  }

  async load(asOf?: string): Promise<MarketData> {
    const full = await this.#load();
    const day = asOf ?? full.latestDate;
    if (day < full.firstDate) throw new RangeError(`AS_OF ${day} is before the first date of the dataset (${full.firstDate})`);
    const candles = new Map<string, Candle[]>();
    for (const [k, v] of full.candles) candles.set(k, cut(v, day));
    const funding = new Map<string, FundingPoint[]>();
    for (const [k, v] of full.funding) {
      const c = cut(v, day);
      if (c.length) funding.set(k, c);
    }
    const chains = new Map<ChainId, Record<string, MetricSeries>>();
    for (const [k, v] of full.chains) {
      const rec: Record<string, MetricSeries> = {};
      for (const [m, s] of Object.entries(v)) rec[m] = { points: cut(s.points, day), source: s.source };
      chains.set(k, rec);
    }
    return {
      asOf: day,
      latestDate: full.latestDate,
      assets: ASSETS,
      candles,
      priceSources: full.priceSources,
      fearGreed: cut(full.fearGreed, day),
      fearGreedSource: FEAR_GREED_SOURCE,
      funding,
      fundingSources: full.fundingSources,
      chains,
      series: this.#series(full),
      gaps: full.gaps.filter((g) => g.from <= day).map((g) => (g.to > day ? { ...g, to: day, days: daysBetween(g.from, day) + 1 } : g)),
    };
  }
}
