import type { SignalEntry } from '../../services/schemas/market.ts';

/** A signed percentage with two decimals, or `n/a`. */
export function pct(v: number | null | undefined): string {
  return v === null || v === undefined ? 'n/a' : `${v >= 0 ? '+' : ''}${v.toFixed(2)}%`;
}

/** ` STALE: <reason>` for an answer with a stale input (schemas/market.ts `stale_reason`), else ''. */
export function staleNote(d: { stale: boolean; stale_reason: string | null }): string {
  return d.stale ? ` (STALE: ${d.stale_reason ?? 'an input is older than its cadence allows'})` : '';
}

/** One line about an asset's signal: level, score, confidence, price in USD, 7-day change in %, and staleness. */
export function signalLine(s: SignalEntry): string {
  return `${s.symbol} ${s.signal} (score ${s.score.toFixed(2)}, confidence ${s.confidence.toFixed(2)}), $${s.price_usd}, 7d ${pct(s.change_7d_pct)}${staleNote(s)}`;
}
