/**
 * Solana daily transactions from the public JSON-RPC `getRecentPerformanceSamples` (Solana RPC
 * docs: each sample counts the transactions, vote transactions included, of `numSlots` slots
 * over `samplePeriodSecs` ≈ 60 s, ending at `slot`; a node keeps at most 720 samples ≈ 12 h).
 * There is no free daily history: this source accumulates samples in memory from the first
 * fetch on and can only return days its samples cover from 00:00 to 24:00 UTC. Sample times
 * are anchored on `getBlockTime` of the newest sample's slot and counted back by
 * `samplePeriodSecs`; a sample belongs to the UTC day of its midpoint (so a day's boundary is
 * exact to within half a sample, ≈ 30 s). A restart (or a poll gap longer than the node's
 * 12 h window, or a hole in the node's samples) loses coverage: the affected days are never
 * returned. docs/live-data.md.
 */
import { z } from 'zod';
import type { ChainId, MetricPoint } from '../../engine/types.ts';
import { DAY_MS, dailyMetricSource, dayOfMs, dayStartMs, type AdapterContext } from './days.ts';
import { UpstreamError, type LiveSource } from './source.ts';

/** The most samples a node returns (and the request's limit). */
export const SAMPLE_LIMIT = 720;
/** Days of samples kept in memory at most. */
const KEEP_DAYS = 31;

const rpcError = z.object({ code: z.number(), message: z.string() });
const samplesSchema = z.object({
  result: z
    .array(
      z.object({
        slot: z.number().int().nonnegative(),
        numTransactions: z.number().int().nonnegative(),
        numSlots: z.number().int().positive(),
        samplePeriodSecs: z.number().int().positive(),
      }),
    )
    .optional(),
  error: rpcError.optional(),
});
const blockTimeSchema = z.object({ result: z.number().int().nullable().optional(), error: rpcError.optional() });

interface Sample {
  /** Last slot of the sample. */
  slot: number;
  numSlots: number;
  tx: number;
  startMs: number;
  endMs: number;
}

/** Daily transactions of Solana, accumulated from performance samples (see the module doc). */
export function solanaTransactions(ctx: AdapterContext, chain: ChainId, metric: string): LiveSource {
  const base = ctx.baseUrls.solanaRpc;
  const source = 'Solana RPC getRecentPerformanceSamples, summed per UTC day (all transactions incl. votes; collected live)';
  /** Samples by last slot. */
  const samples = new Map<number, Sample>();

  async function rpc<T extends { error?: { code: number; message: string } | undefined }>(
    method: string,
    params: unknown[],
    schema: z.ZodType<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const body = await ctx.http.json({
      source,
      url: base,
      method: 'POST',
      body: { jsonrpc: '2.0', id: 1, method, params },
      schema,
      signal,
    });
    if (body.error) throw new UpstreamError(source, `${source}: ${method}: RPC error ${body.error.code} ${body.error.message}`, 'http');
    return body;
  }

  async function collect(signal?: AbortSignal): Promise<void> {
    const { result } = await rpc('getRecentPerformanceSamples', [SAMPLE_LIMIT], samplesSchema, signal);
    if (!result)
      throw new UpstreamError(
        source,
        `${source}: getRecentPerformanceSamples: unexpected response format at field result: missing`,
        'format',
      );
    if (result.length === 0) return;
    const sorted = [...result].sort((a, b) => b.slot - a.slot);
    const newest = sorted[0]!;
    const bt = await rpc('getBlockTime', [newest.slot], blockTimeSchema, signal);
    if (bt.result === null || bt.result === undefined) {
      throw new UpstreamError(
        source,
        `${source}: getBlockTime: unexpected response format at field result: no time for slot ${newest.slot}`,
        'format',
      );
    }
    // Walk back from the newest sample while the samples are slot-contiguous.
    let end = bt.result * 1000;
    for (let i = 0; i < sorted.length; i++) {
      const s = sorted[i]!;
      if (i > 0 && sorted[i - 1]!.slot - sorted[i - 1]!.numSlots !== s.slot) break;
      const start = end - s.samplePeriodSecs * 1000;
      if (!samples.has(s.slot))
        samples.set(s.slot, { slot: s.slot, numSlots: s.numSlots, tx: s.numTransactions, startMs: start, endMs: end });
      end = start;
    }
  }

  /** Runs of slot-contiguous samples as time spans. */
  function coverage(list: Sample[]): { startMs: number; endMs: number }[] {
    const runs: { startMs: number; endMs: number }[] = [];
    let prev: Sample | undefined;
    for (const s of list) {
      if (prev && s.slot - s.numSlots === prev.slot) runs.at(-1)!.endMs = s.endMs;
      else runs.push({ startMs: s.startMs, endMs: s.endMs });
      prev = s;
    }
    return runs;
  }

  return dailyMetricSource({
    chain,
    metric,
    base,
    source,
    schedule: '*/15 * * * *',
    async points(after, today, signal) {
      await collect(signal);
      const keepFrom = Math.max(dayStartMs(after) + DAY_MS, dayStartMs(today) - KEEP_DAYS * DAY_MS);
      for (const [slot, s] of samples) if (s.endMs <= keepFrom) samples.delete(slot);
      const list = [...samples.values()].sort((a, b) => a.slot - b.slot);
      const runs = coverage(list);
      const totals = new Map<string, number>();
      for (const s of list) {
        const d = dayOfMs((s.startMs + s.endMs) / 2);
        totals.set(d, (totals.get(d) ?? 0) + s.tx);
      }
      const points: MetricPoint[] = [];
      for (const [date, value] of [...totals.entries()].sort()) {
        if (date <= after || date >= today) continue;
        const from = dayStartMs(date);
        if (runs.some((r) => r.startMs <= from && r.endMs >= from + DAY_MS)) points.push({ date, value });
      }
      return points;
    },
  });
}
