/**
 * Tiny reader for the bundled dataset (data/*.csv) used by the engine tests, independent of
 * the service's loader in src/providers. Empty cells are skipped (never filled).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Candle, FearGreedPoint, FundingPoint, MetricPoint } from '../../src/engine/types.ts';

export const DATA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'data');

/** Rows of a simple CSV (no quoted commas in these files) as header->cell records. */
export function readCsv(rel: string): Record<string, string>[] {
  const lines = readFileSync(join(DATA_DIR, rel), 'utf8')
    .split(/\r?\n/)
    .filter((l) => l.length > 0);
  const header = lines[0]!.split(',');
  return lines.slice(1).map((l) => {
    const cells = l.split(',');
    const rec: Record<string, string> = {};
    header.forEach((h, i) => {
      rec[h] = cells[i] ?? '';
    });
    return rec;
  });
}

/** Daily candles of prices/<file>.csv (e.g. 'btc'). */
export function loadCandles(file: string): Candle[] {
  return readCsv(`prices/${file}.csv`).map((r) => ({
    date: r.date!,
    open: Number(r.open),
    high: Number(r.high),
    low: Number(r.low),
    close: Number(r.close),
    volume: r.volume ? Number(r.volume) : null,
  }));
}

/** fear_greed.csv. */
export function loadFearGreed(): FearGreedPoint[] {
  return readCsv('fear_greed.csv').map((r) => ({ date: r.date!, value: Number(r.value), classification: r.classification! }));
}

/** funding/<file>.csv daily means (e.g. 'btc_daily'). */
export function loadFunding(file: string): FundingPoint[] {
  return readCsv(`funding/${file}.csv`)
    .filter((r) => r.funding_rate_mean !== '')
    .map((r) => ({ date: r.date!, rate: Number(r.funding_rate_mean) }));
}

/** Metric series of chains/<file>.csv keyed by column name, empty cells skipped. */
export function loadChain(file: string): Record<string, MetricPoint[]> {
  const rows = readCsv(`chains/${file}.csv`);
  const out: Record<string, MetricPoint[]> = {};
  for (const r of rows) {
    for (const [k, v] of Object.entries(r)) {
      if (k === 'date' || v === '') continue;
      const series = out[k] ?? [];
      series.push({ date: r.date!, value: Number(v) });
      out[k] = series;
    }
  }
  return out;
}

/** Keeps only items dated <= `date` (the point-in-time cut). */
export function cut<T extends { date: string }>(xs: readonly T[], date: string): T[] {
  return xs.filter((x) => x.date <= date);
}

/** Asset id -> prices file, funding file (or null), chain file (or null). */
export const ASSETS: { asset: string; file: string; funding: string | null; chain: { id: 'eth' | 'sol' | 'hype'; file: string } | null }[] =
  [
    { asset: 'bitcoin', file: 'btc', funding: 'btc_daily', chain: null },
    { asset: 'ethereum', file: 'eth', funding: 'eth_daily', chain: { id: 'eth', file: 'ethereum' } },
    { asset: 'solana', file: 'sol', funding: 'sol_daily', chain: { id: 'sol', file: 'solana' } },
    { asset: 'hyperliquid', file: 'hype', funding: null, chain: { id: 'hype', file: 'hyperliquid' } },
    { asset: 'binancecoin', file: 'bnb', funding: null, chain: null },
    { asset: 'ripple', file: 'xrp', funding: null, chain: null },
    { asset: 'dogecoin', file: 'doge', funding: null, chain: null },
    { asset: 'cardano', file: 'ada', funding: null, chain: null },
    { asset: 'avalanche-2', file: 'avax', funding: null, chain: null },
    { asset: 'chainlink', file: 'link', funding: null, chain: null },
    { asset: 'litecoin', file: 'ltc', funding: null, chain: null },
  ];
