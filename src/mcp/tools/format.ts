import type { SignalEntry } from '../../services/schemas/market.ts';

/** A signed percentage with two decimals, or `n/a`. */
export function pct(v: number | null | undefined): string {
  return v === null || v === undefined ? 'n/a' : `${v >= 0 ? '+' : ''}${v.toFixed(2)}%`;
}

/** One line about an asset's signal: level, score, confidence, price, 7-day change. */
export function signalLine(s: SignalEntry): string {
  return `${s.symbol} ${s.signal} (score ${s.score.toFixed(2)}, confidence ${s.confidence.toFixed(2)}), $${s.price_usd}, 7d ${pct(s.change_7d_pct)}`;
}
