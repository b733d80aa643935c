import type { HistoryEntry, SignalEntry } from '../../services/schemas/market.ts';

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

/**
 * `n` and the noun, singular for exactly 1 and plural otherwise: `1 day`, `0 days`, `2 signal
 * changes`. `plural` defaults to the noun with `s` added.
 */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}

/**
 * Why a stored signal change took its level, in a few words (its `level_rule`; the full
 * sentence is the rule's `explanation`, in the JSON): the reason (`band`, `hysteresis`,
 * `confirmation`, `volatility_gate`), the score's band, and the figures behind the rule (the
 * gate's downside ratio against its maximum, the days of a pending change). A change stored
 * before the history kept the rule (`null`) says so.
 */
export function levelReason(rule: HistoryEntry['level_rule']): string {
  if (!rule) return 'not recorded (stored before the history kept it)';
  const band = `score in the ${rule.score_level} band`;
  switch (rule.reason) {
    case 'band':
      return `band (${band})`;
    case 'hysteresis':
      return `hysteresis (${band}; the level is kept until the score passes the band's edge by the margin)`;
    case 'confirmation': {
      const p = rule.pending;
      return `confirmation (${band}; ${p ? `${p.signal} waits for ${count(p.needed, 'consecutive day')}, day ${p.days} of ${p.needed}` : 'a change waits for its consecutive days'})`;
    }
    case 'volatility_gate': {
      const g = rule.volatility_gate;
      return `volatility_gate (${band}; buys held at neutral${g ? `: ${g.short_days}-day downside volatility ${g.downside_ratio ?? 'n/a'}x the ${g.long_days}-day, above ${g.max}x` : ''})`;
    }
  }
}
