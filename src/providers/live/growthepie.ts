/**
 * growthepie fundamentals: `GET /v1/fundamentals.json`, one JSON array of
 * `{metric_key, origin_key, date: YYYY-MM-DD, value}` for every chain and metric (several MB;
 * updated daily around 05:00 UTC). Ethereum mainnet is `origin_key: "ethereum"`; `daa` is daily
 * active addresses, `txcount` daily transactions. Format: growthepie API docs ("Fundamentals
 * endpoint"). Not the same source as the bundled Etherscan series: docs/live-data.md.
 */
import { z } from 'zod';
import type { ChainId, MetricPoint } from '../../engine/types.ts';
import { completeDays, dailyMetricSource, finite, isoDay, type AdapterContext } from './days.ts';
import type { LiveSource } from './source.ts';

const schema = z.array(
  z.object({
    metric_key: z.string(),
    origin_key: z.string(),
    date: isoDay,
    value: finite,
  }),
);
type Rows = z.infer<typeof schema>;

/**
 * The fundamentals file is shared by several series: concurrent fetches share one request
 * (no caching beyond the request in flight).
 */
const inFlight = new WeakMap<AdapterContext, Promise<Rows>>();

/** One growthepie metric of one chain (e.g. origin 'ethereum', key 'daa'). */
export function growthepieMetric(
  ctx: AdapterContext,
  chain: ChainId,
  metric: string,
  origin: string,
  key: string,
  what: string,
): LiveSource {
  const base = ctx.baseUrls.growthepie;
  const source = `growthepie /v1/fundamentals.json ${origin} ${key} (${what})`;
  return dailyMetricSource({
    chain,
    metric,
    base,
    source,
    schedule: '40 */3 * * *',
    async points(after, today, signal) {
      let p = inFlight.get(ctx);
      if (!p) {
        p = ctx.http.json({ source: 'growthepie /v1/fundamentals.json', url: `${base}/v1/fundamentals.json`, schema, signal });
        inFlight.set(ctx, p);
        p.finally(() => inFlight.delete(ctx)).catch(() => {});
      }
      const rows = await p;
      const points: MetricPoint[] = rows
        .filter((r) => r.origin_key === origin && r.metric_key === key)
        .map((r) => ({ date: r.date, value: r.value }));
      return completeDays(source, '/v1/fundamentals.json', points, after, today);
    },
  });
}
