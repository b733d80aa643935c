/**
 * DefiLlama adapters (free API, api.llama.fi): chain TVL `GET /v2/historicalChainTvl/{chain}`
 * (`[{date: unix s, tvl: USD}]`), protocol TVL `GET /protocol/{slug}` (`tvl[].{date,
 * totalLiquidityUSD}`) and daily fees `GET /summary/fees/{slug}?dataType=dailyFees`
 * (`totalDataChart: [[unix s, USD]]`). Formats: DefiLlama API docs (defillama-openapi-free.json,
 * excerpt in data/fixtures/defillama). Points not stamped at 00:00 UTC are live snapshots of
 * the current day and are skipped. docs/live-data.md.
 */
import { z } from 'zod';
import type { ChainId, MetricPoint } from '../../engine/types.ts';
import { DAY_MS, completeDays, dailyMetricSource, dayOfMs, finite, type AdapterContext } from './days.ts';
import type { LiveSource } from './source.ts';

const unixSeconds = z.number().int().nonnegative();
const chainTvlSchema = z.array(z.object({ date: unixSeconds, tvl: finite }));
const protocolSchema = z.object({ tvl: z.array(z.object({ date: unixSeconds, totalLiquidityUSD: finite })) });
const feesSchema = z.object({ totalDataChart: z.array(z.tuple([unixSeconds, finite])) });

function daily(points: { s: number; value: number }[]): MetricPoint[] {
  return points.filter((p) => (p.s * 1000) % DAY_MS === 0).map((p) => ({ date: dayOfMs(p.s * 1000), value: p.value }));
}

function metricSource(
  ctx: AdapterContext,
  chain: ChainId,
  metric: string,
  path: string,
  source: string,
  read: (body: unknown) => MetricPoint[],
  schema: z.ZodType,
): LiveSource {
  const base = ctx.baseUrls.defillama;
  return dailyMetricSource({
    chain,
    metric,
    base,
    source,
    schedule: '20 * * * *',
    async points(after, today, signal) {
      const body = await ctx.http.json({ source, url: `${base}${path}`, schema, signal });
      return completeDays(source, path.split('?')[0]!, read(body), after, today);
    },
  });
}

/** Chain TVL in USD of a DefiLlama chain name (e.g. 'Ethereum', 'Solana'). */
export function defillamaChainTvl(ctx: AdapterContext, chain: ChainId, metric: string, llamaChain: string): LiveSource {
  const path = `/v2/historicalChainTvl/${encodeURIComponent(llamaChain)}`;
  return metricSource(
    ctx,
    chain,
    metric,
    path,
    `DefiLlama chain TVL ${path} (USD)`,
    (b) => daily((b as z.infer<typeof chainTvlSchema>).map((r) => ({ s: r.date, value: r.tvl }))),
    chainTvlSchema,
  );
}

/** Protocol TVL in USD (`tvl[].totalLiquidityUSD`) of a DefiLlama protocol slug (e.g. 'hyperliquid'). */
export function defillamaProtocolTvl(ctx: AdapterContext, chain: ChainId, metric: string, slug: string): LiveSource {
  const path = `/protocol/${encodeURIComponent(slug)}`;
  return metricSource(
    ctx,
    chain,
    metric,
    path,
    `DefiLlama protocol TVL ${path} tvl[].totalLiquidityUSD (USD)`,
    (b) => daily((b as z.infer<typeof protocolSchema>).tvl.map((r) => ({ s: r.date, value: r.totalLiquidityUSD }))),
    protocolSchema,
  );
}

/** Daily fees in USD (`totalDataChart`) of a DefiLlama protocol slug. */
export function defillamaDailyFees(ctx: AdapterContext, chain: ChainId, metric: string, slug: string): LiveSource {
  const path = `/summary/fees/${encodeURIComponent(slug)}?dataType=dailyFees`;
  return metricSource(
    ctx,
    chain,
    metric,
    path,
    `DefiLlama /summary/fees/${slug} dailyFees (USD)`,
    (b) => daily((b as z.infer<typeof feesSchema>).totalDataChart.map(([s, value]) => ({ s, value }))),
    feesSchema,
  );
}
