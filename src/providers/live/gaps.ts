/**
 * The series the engine uses that no live adapter fetches (docs/live-data.md, "Documented
 * gaps"). A module of its own, without the adapters, so that GET /status can name them
 * without loading the live sources (src/services/market.ts).
 */

/** A series the engine uses that no adapter fetches, and why. */
export interface DocumentedGap {
  series: string;
  reason: string;
}

/** Series used by the engine (src/engine/chain-health.ts) without a free, key-less source. */
export const DOCUMENTED_GAPS: readonly DocumentedGap[] = [
  {
    series: 'metric:eth:gas_used',
    reason:
      'Etherscan daily gas used needs an API key (Etherscan stats endpoints); no key-free daily series with the same definition was found. growthepie publishes gas_per_second, a different (derived) measure, not substituted.',
  },
  {
    series: 'metric:eth:fees_usd_etherscan_derived',
    reason:
      'The bundled series is derived from Etherscan daily transactions × average fee (keyed API); no key-free daily source of the same quantity. growthepie/DefiLlama fee series use other definitions and are not substituted.',
  },
];

/** The reason no live source fetches `series` (DOCUMENTED_GAPS), or null when one does. */
export function documentedGap(series: string): string | null {
  return DOCUMENTED_GAPS.find((g) => g.series === series)?.reason ?? null;
}
