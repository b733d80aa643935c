import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  AssetsDataSchema,
  ChainHealthListSchema,
  ChainHealthSchema,
  ChainMetricsSchema,
  HistoryDataSchema,
  RegimeDataSchema,
  SignalEntrySchema,
  SignalsDataSchema,
} from '../../../services/schemas.ts';
import type { MarketService } from '../../../services/market.ts';
import { ErrorEnvelopeSchema, okEnvelope, sendOk } from '../../envelope.ts';
import { HISTORY_TIERS } from '../../../auth/tiers.ts';

/** `include_factors`: only the literal strings `true` and `false` are accepted. */
export const IncludeFactors = z
  .enum(['true', 'false'], { error: "must be 'true' or 'false'" })
  .optional()
  .describe('Add the factor breakdown (`true`) or not (`false`, default)');

/** Integer query parameter within bounds, rejected (never clamped) outside them. */
export function boundedInt(min: number, max: number, dflt: number, what: string) {
  const msg = `must be an integer from ${min} to ${max}`;
  // Decimal digits only: no hex (0x10), exponent (1e2) or binary (0b11) forms.
  return z
    .string({ error: msg })
    .regex(/^\d{1,6}$/, { error: msg })
    .transform(Number)
    .pipe(z.number().int().min(min, { error: msg }).max(max, { error: msg }))
    .optional()
    .transform((v) => v ?? dflt)
    // The documented (OpenAPI) type is the integer the string stands for.
    .meta({ type: 'integer', minimum: min, maximum: max, default: dflt, description: `${what} (${min}..${max}, default ${dflt})` });
}

export const HistoryQuery = z.object({
  days: boundedInt(1, 365, 30, 'History period in days, ending at the as-of day'),
  limit: boundedInt(1, 200, 50, 'Maximum number of entries'),
});

const AssetParam = z.object({ asset: z.string().min(1).max(64).describe('Asset id (e.g. `bitcoin`) or ticker (`btc`), any case') });
const ChainParam = z.object({ asset: z.string().min(1).max(64).describe('Chain: `eth`, `sol` or `hype`') });

const errors = { 400: ErrorEnvelopeSchema, 401: ErrorEnvelopeSchema, 404: ErrorEnvelopeSchema, 429: ErrorEnvelopeSchema, 500: ErrorEnvelopeSchema };

/**
 * The public market routes of /api/v1 (signals, regime, chain health, chain metrics,
 * assets, signal history): thin adapters over `MarketService`.
 */
export async function marketRoutes(app: FastifyInstance, opts: { market: MarketService }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const m = opts.market;

  r.get('/signals', {
    schema: {
      tags: ['signals'],
      summary: 'Signals of all assets',
      description: 'Current five-level signal per asset with score, confidence, price and changes; `include_factors=true` adds the factor breakdown whose contributions sum to the score.',
      querystring: z.object({ include_factors: IncludeFactors }),
      response: { 200: okEnvelope(SignalsDataSchema), ...errors },
    },
  }, async (req, reply) => {
    const c = m.signals(req.query.include_factors === 'true');
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/signals/:asset', {
    schema: {
      tags: ['signals'],
      summary: 'Signal of one asset',
      params: AssetParam,
      querystring: z.object({ include_factors: IncludeFactors }),
      response: { 200: okEnvelope(SignalEntrySchema), ...errors },
    },
  }, async (req, reply) => {
    const c = m.signal(req.params.asset, req.query.include_factors === 'true');
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/regime', {
    schema: {
      tags: ['regime'],
      summary: 'BTC market regime',
      description: 'bull / bear / neutral with hysteresis, the conditions behind it (RSI-14, Fear & Greed, momentum, funding rate) and the signals of all assets.',
      response: { 200: okEnvelope(RegimeDataSchema), ...errors },
    },
  }, async (req, reply) => {
    const c = m.regime();
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/chain-health', {
    schema: {
      tags: ['chains'],
      summary: 'Health scores of eth, sol and hype',
      description: 'Z-score normalized on-chain health (0..100, 50 = normal) with regime-adjusted sensitivity; stale or missing metrics are listed, not filled.',
      response: { 200: okEnvelope(ChainHealthListSchema), ...errors },
    },
  }, async (req, reply) => {
    const c = m.chainHealth();
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/chain-health/:asset', {
    schema: { tags: ['chains'], summary: 'Health score of one chain', params: ChainParam, response: { 200: okEnvelope(ChainHealthSchema), ...errors } },
  }, async (req, reply) => {
    const c = m.chainHealthOf(req.params.asset);
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/chain-metrics/:asset', {
    schema: {
      tags: ['chains'],
      summary: 'Raw chain metrics with 7-day deltas',
      description: 'Every metric of the chain with its newest value (and that value\'s own as_of), the change over 7 days and its source; a metric without data has `value: null`.',
      params: ChainParam,
      response: { 200: okEnvelope(ChainMetricsSchema), ...errors },
    },
  }, async (req, reply) => {
    const c = m.chainMetrics(req.params.asset);
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/assets', {
    schema: { tags: ['assets'], summary: 'Supported assets with signals and capability flags', response: { 200: okEnvelope(AssetsDataSchema), ...errors } },
  }, async (req, reply) => {
    const c = m.assets();
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });

  r.get('/signal-history/:asset', {
    config: { auth: 'key', tiers: HISTORY_TIERS },
    schema: {
      tags: ['signals'],
      summary: 'Historical signal changes (Pro or API tier)',
      description: 'Changes of the signal level, newest first, each with the factor snapshot computed point-in-time from data up to that day.',
      params: AssetParam,
      querystring: HistoryQuery,
      response: { 200: okEnvelope(HistoryDataSchema), 403: ErrorEnvelopeSchema, ...errors },
      security: [{ bearerApiKey: [] }],
    },
  }, async (req, reply) => {
    const c = await m.signalHistory(req.params.asset, req.query.days, req.query.limit);
    return sendOk(req, reply, c.json, c.cached, m.asOf);
  });
}
