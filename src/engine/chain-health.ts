/**
 * Chain health (0..100, 50 = normal) per chain and date, causal.
 *
 * Method (docs/methodology.md, "Chain health"): for each metric, the mean of the values in
 * the 7 days ending at the metric's newest date <= D is compared with the distribution of the
 * same 7-day means over the 90 days before that window (z-score, clipped to ±3). The
 * composite z is the weighted mean of the available metrics (weights renormalized); the BTC
 * regime sets a sensitivity multiplier; score = 50 + 50 * tanh(sensitivity * z / 2).
 */
import type { ChainHealthComponent, ChainHealthResult, ChainId, ChainStatus, MetricPoint, RegimeLevel } from './types.ts';
import { assertAscending, clamp, dayNumber, normalizeWeights, round } from './util.ts';

/**
 * Metrics and base weights per chain (each chain's weights sum to 1). Keys are the column
 * names of data/chains/<chain>.csv. Higher = healthier for all of them. See
 * docs/methodology.md for why each weight.
 */
export const CHAIN_HEALTH_METRICS: Record<ChainId, { metric: string; weight: number }[]> = {
  eth: [
    { metric: 'tvl', weight: 0.3 },
    { metric: 'transactions', weight: 0.2 },
    { metric: 'active_addresses', weight: 0.2 },
    { metric: 'fees_usd_etherscan_derived', weight: 0.2 },
    { metric: 'gas_used', weight: 0.1 },
  ],
  sol: [
    { metric: 'tvl', weight: 0.6 },
    { metric: 'transactions', weight: 0.4 },
  ],
  hype: [
    { metric: 'tvl_protocol_defillama', weight: 0.3 },
    { metric: 'dex_volume', weight: 0.25 },
    { metric: 'active_addresses', weight: 0.2 },
    { metric: 'fees', weight: 0.15 },
    { metric: 'net_inflow_usd', weight: 0.1 },
  ],
};

/** Length of the "recent" window, calendar days ending at the metric's newest date. */
export const RECENT_DAYS = 7;
/** Minimum values present in a 7-day window for its mean to count. */
export const MIN_RECENT_OBS = 4;
/** Length of the trailing baseline, calendar days before the recent window. */
export const BASELINE_DAYS = 90;
/** Minimum baseline days with a valid 7-day mean for a z-score. */
export const MIN_BASELINE_OBS = 60;
/** A metric whose newest value is more than this many days before D is missing (stale). */
export const CHAIN_STALENESS_DAYS = 14;
/** Per-metric z-scores are clipped to ±this. */
export const Z_CLIP = 3;
/**
 * A baseline stdev, or a difference between the recent mean and the baseline mean, at most this
 * fraction of the largest |7-day mean| involved counts as 0 (float noise of means over windows
 * with different counts: a constant series is flat, not a ±3 move).
 */
export const FLAT_TOLERANCE = 1e-12;
/** Regime sensitivity multipliers applied to the composite z before mapping to 0..100. */
export const REGIME_SENSITIVITY: Record<RegimeLevel, number> = { bull: 0.8, neutral: 1, bear: 1.25 };

/** Status bands of a 0..100 chain health score. */
export function chainStatus(score: number): Exclude<ChainStatus, 'insufficient_data'> {
  if (score >= 75) return 'strong';
  if (score >= 60) return 'healthy';
  if (score >= 40) return 'neutral';
  if (score >= 25) return 'weak';
  return 'critical';
}

/** Maps a composite z and a sensitivity to 0..100: 50 + 50 * tanh(sensitivity * z / 2), 2 decimals. */
export function healthScore(z: number, sensitivity: number): number {
  return round(50 + 50 * Math.tanh((sensitivity * z) / 2), 2);
}

type MetricEval = { ok: true; recent: number; z: number; as_of: string } | { ok: false; reason: string };

/** Precomputed per-metric state: rolling 7-day means per point and a memo of z per anchor point. */
class MetricModel {
  readonly dn: number[];
  readonly mean7: number[];
  readonly cnt7: number[];
  readonly memo = new Map<number, MetricEval>();

  constructor(
    readonly metric: string,
    readonly pts: readonly MetricPoint[],
  ) {
    assertAscending(pts, `metric ${metric}`);
    this.dn = pts.map((p, i) => {
      if (!Number.isFinite(p.value)) throw new RangeError(`metric ${metric}: value at index ${i} (${p.date}) is not finite`);
      return dayNumber(p.date);
    });
    this.mean7 = new Array<number>(pts.length);
    this.cnt7 = new Array<number>(pts.length);
    let lo = 0;
    for (let k = 0; k < pts.length; k++) {
      while (this.dn[lo]! < this.dn[k]! - (RECENT_DAYS - 1)) lo++;
      // At most 7 points: sum exactly rather than keep a running sum that could drift.
      let s = 0;
      for (let m = lo; m <= k; m++) s += pts[m]!.value;
      this.cnt7[k] = k - lo + 1;
      this.mean7[k] = s / (k - lo + 1);
    }
  }

  /** z of the 7-day mean ending at point k against the prior 90 days' 7-day means. */
  evalAt(k: number): MetricEval {
    const hit = this.memo.get(k);
    if (hit) return hit;
    let res: MetricEval;
    if (this.cnt7[k]! < MIN_RECENT_OBS) {
      res = { ok: false, reason: `only ${this.cnt7[k]} of ${RECENT_DAYS} days have a value in the recent window (need ${MIN_RECENT_OBS})` };
    } else {
      const end = this.dn[k]! - RECENT_DAYS; // last baseline day
      const start = end - (BASELINE_DAYS - 1);
      const xs: number[] = [];
      for (let m = k - 1; m >= 0 && this.dn[m]! >= start; m--) {
        if (this.dn[m]! <= end && this.cnt7[m]! >= MIN_RECENT_OBS) xs.push(this.mean7[m]!);
      }
      if (xs.length < MIN_BASELINE_OBS) {
        res = { ok: false, reason: `only ${xs.length} of ${BASELINE_DAYS} baseline days have a 7-day mean (need ${MIN_BASELINE_OBS})` };
      } else {
        const mu = xs.reduce((a, b) => a + b, 0) / xs.length;
        const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mu) ** 2, 0) / (xs.length - 1));
        const recent = this.mean7[k]!;
        // Means of a constant series over windows with different counts (a gap) differ in the
        // last bits (0.1 * 5 / 5 vs 0.1 * 7 / 7), which made a zero stdev a tiny positive one and
        // the z any value: differences within FLAT_TOLERANCE of the largest |mean| are float noise.
        const tol = FLAT_TOLERANCE * xs.reduce((a, x) => Math.max(a, Math.abs(x)), Math.abs(recent));
        const zRaw = sd > tol ? (recent - mu) / sd : Math.abs(recent - mu) <= tol ? 0 : Math.sign(recent - mu) * Z_CLIP;
        res = { ok: true, recent, z: clamp(zRaw, -Z_CLIP, Z_CLIP), as_of: this.pts[k]!.date };
      }
    }
    this.memo.set(k, res);
    return res;
  }
}

/**
 * Computes chain health for each requested date.
 *
 * @param input.chain which chain (selects the metrics and weights of {@link CHAIN_HEALTH_METRICS}).
 * @param input.metrics metric series keyed by CSV column name, each strictly ascending by date;
 *   keys not used by the chain are ignored, used keys that are absent count as missing.
 * @param input.regimeByDate the BTC regime in force at a date (only called with requested dates).
 * @param input.dates evaluation dates, strictly ascending.
 * @returns one {@link ChainHealthResult} per date (same order). A result for D uses only
 *   metric values dated <= D. `z_score` is the composite before the regime multiplier and
 *   equals the sum of the component contributions; `score`/`z_score` are null and status is
 *   `insufficient_data` when no metric has a usable value. `window_days` is the baseline
 *   length (90); `as_of` is the newest metric date used; `date` is D.
 * @throws RangeError on unsorted dates or series, bad dates or non-finite values.
 */
export function computeChainHealthSeries(input: {
  chain: ChainId;
  metrics: Record<string, MetricPoint[]>;
  regimeByDate: (date: string) => RegimeLevel;
  dates: string[];
}): ChainHealthResult[] {
  const { chain, metrics, regimeByDate, dates } = input;
  const spec = CHAIN_HEALTH_METRICS[chain];
  if (!spec) throw new RangeError(`unknown chain '${chain}'`);
  assertAscending(
    dates.map((date) => ({ date })),
    'chain health dates',
  );
  const models = spec.map((s) => {
    const pts = metrics[s.metric];
    return { ...s, model: pts ? new MetricModel(s.metric, pts) : null, ptr: -1 };
  });

  const out: ChainHealthResult[] = [];
  for (const d of dates) {
    const dn = dayNumber(d);
    const avail: { metric: string; weight: number; recent: number; z: number; as_of: string }[] = [];
    const missing: ChainHealthResult['missing_metrics'] = [];
    for (const m of models) {
      if (!m.model) {
        missing.push({ metric: m.metric, last_date: null, reason: 'metric not provided' });
        continue;
      }
      const pts = m.model.pts;
      while (m.ptr + 1 < pts.length && pts[m.ptr + 1]!.date <= d) m.ptr++;
      if (m.ptr < 0) {
        missing.push({ metric: m.metric, last_date: null, reason: `no value on or before ${d}` });
        continue;
      }
      const last = pts[m.ptr]!.date;
      const age = dn - m.model.dn[m.ptr]!;
      if (age > CHAIN_STALENESS_DAYS) {
        missing.push({
          metric: m.metric,
          last_date: last,
          reason: `stale: newest value is ${age} days old (limit ${CHAIN_STALENESS_DAYS})`,
        });
        continue;
      }
      const ev = m.model.evalAt(m.ptr);
      if (!ev.ok) {
        missing.push({ metric: m.metric, last_date: last, reason: ev.reason });
        continue;
      }
      avail.push({ metric: m.metric, weight: m.weight, recent: ev.recent, z: ev.z, as_of: ev.as_of });
    }

    const regime = regimeByDate(d);
    const sensitivity = REGIME_SENSITIVITY[regime];
    if (avail.length === 0) {
      out.push({
        chain,
        score: null,
        status: 'insufficient_data',
        z_score: null,
        regime,
        sensitivity,
        components: [],
        missing_metrics: missing,
        window_days: BASELINE_DAYS,
        as_of: null,
        date: d,
      });
      continue;
    }
    const weights = normalizeWeights(
      avail.map((x) => x.weight),
      4,
    );
    const components: ChainHealthComponent[] = avail.map((x, i) => {
      const weight = weights[i]!;
      const z = round(x.z, 4);
      return { metric: x.metric, value: round(x.recent, 2), z_score: z, weight, contribution: round(weight * z, 4), as_of: x.as_of };
    });
    const zc = round(
      components.reduce((a, c) => a + c.contribution, 0),
      4,
    );
    const score = healthScore(zc, sensitivity);
    const asOf = avail.reduce((a, x) => (x.as_of > a ? x.as_of : a), avail[0]!.as_of);
    out.push({
      chain,
      score,
      status: chainStatus(score),
      z_score: zc,
      regime,
      sensitivity,
      components,
      missing_metrics: missing,
      window_days: BASELINE_DAYS,
      as_of: asOf,
      date: d,
    });
  }
  return out;
}

/**
 * The chain-health result for `date`: the newest result whose evaluation `date` is <= `date`
 * (binary search), or null when the series starts later. Use this (not `as_of`, which is the
 * newest metric date and may be far older) to align chain health with other series.
 */
export function chainHealthAt(series: readonly ChainHealthResult[], date: string): ChainHealthResult | null {
  let lo = 0;
  let hi = series.length - 1;
  let ans: ChainHealthResult | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (series[mid]!.date <= date) {
      ans = series[mid]!;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return ans;
}
