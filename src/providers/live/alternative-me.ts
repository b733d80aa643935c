/**
 * alternative.me Crypto Fear & Greed Index: `GET /fng/?limit=0&format=json` (the whole history,
 * newest first; `value` and `timestamp` are strings, timestamps unix seconds at 00:00 UTC).
 * Format: alternative.me "Crypto Fear & Greed Index API" docs; recorded responses in
 * data/fixtures/alternative_me. docs/live-data.md.
 */
import { z } from 'zod';
import type { FearGreedPoint } from '../../engine/types.ts';
import { DAY_MS, checkWindow, completeDays, dayOfMs, type AdapterContext } from './days.ts';
import { UpstreamError, type LiveSource, type SeriesPoints } from './source.ts';

const schema = z.object({
  data: z.array(
    z.object({
      value: z
        .string()
        .regex(/^\d{1,3}$/, 'expected an integer in a string')
        .transform(Number)
        .refine((v) => v <= 100, 'outside 0..100'),
      value_classification: z.string().min(1),
      timestamp: z.string().regex(/^\d+$/, 'expected unix seconds in a string').transform(Number),
    }),
  ),
  metadata: z.object({ error: z.string().nullable() }),
});

/** The daily Fear & Greed series (series id `fear_greed`). */
export function alternativeMeFearGreed(ctx: AdapterContext): LiveSource {
  const base = ctx.baseUrls.alternativeMe;
  const source = 'alternative.me Crypto Fear & Greed Index /fng/';
  return {
    series: 'fear_greed',
    kind: 'fear_greed',
    asset: null,
    chain: null,
    metric: null,
    host: new URL(base).host,
    source,
    cadenceHours: 24,
    schedule: '10 * * * *',
    async fetch(after: string, today: string, signal?: AbortSignal): Promise<SeriesPoints> {
      checkWindow(after, today);
      const body = await ctx.http.json({ source, url: `${base}/fng/?limit=0&format=json`, schema, signal });
      if (body.metadata.error !== null)
        throw new UpstreamError(source, `${source}: /fng/: upstream error '${body.metadata.error}'`, 'http');
      const points: FearGreedPoint[] = body.data.map((r, i) => {
        const ms = r.timestamp * 1000;
        if (ms % DAY_MS !== 0) {
          throw new UpstreamError(
            source,
            `${source}: /fng/: unexpected response format at field data[${i}].timestamp: ${r.timestamp} is not 00:00 UTC`,
            'format',
          );
        }
        return { date: dayOfMs(ms), value: r.value, classification: r.value_classification };
      });
      return { kind: 'fear_greed', points: completeDays(source, '/fng/', points, after, today), source };
    },
  };
}
