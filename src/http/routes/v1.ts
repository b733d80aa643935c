import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import * as ops from '../../services/operations/index.ts';
import type { Operation, Services } from '../../services/operation.ts';
import { PageCursor } from '../../services/schemas/common.ts';
import { CreateKeyInput, KEY_PAGE, RevokeKeyInput } from '../../services/schemas/keys.ts';
import { THESIS_PAGE, ThesisCursor, ThesisIdInput, ThesisInputSchema } from '../../services/schemas/theses.ts';
import type { AsOf } from '../envelope.ts';
import { operationRoute, type RouteParts, type RouteSpec } from '../route.ts';

/** A boolean query flag: only the literal strings `true` and `false` are accepted (absent = false). */
function queryFlag(what: string) {
  return z
    .enum(['true', 'false'], { error: "must be 'true' or 'false'" })
    .optional()
    .describe(`${what} (\`true\`) or not (\`false\`, default)`);
}

/** `include_factors` of the signal routes. */
export const IncludeFactors = queryFlag('Add the factor breakdown');
/** `include_health` of GET /thesis. */
const IncludeHealth = queryFlag("Add each thesis's health, as GET /thesis/{id}/health answers it");

/** Integer query parameter within bounds, rejected (never clamped) outside them. */
export function boundedInt(min: number, max: number, dflt: number, what: string) {
  const msg = `must be an integer from ${min} to ${max}`;
  // Decimal digits only: no hex (0x10), exponent (1e2) or binary (0b11) forms.
  return (
    z
      .string({ error: msg })
      .regex(/^\d{1,6}$/, { error: msg })
      .transform(Number)
      .pipe(z.number().int().min(min, { error: msg }).max(max, { error: msg }))
      .optional()
      .transform((v) => v ?? dflt)
      // The documented (OpenAPI) type is the integer the string stands for.
      .meta({ type: 'integer', minimum: min, maximum: max, default: dflt, description: `${what} (${min}..${max}, default ${dflt})` })
  );
}

/** Query of GET /signal-history/{asset}. */
export const HistoryQuery = z.object({
  days: boundedInt(1, 365, 30, 'History period in days, ending at `end` (default: the as-of day)'),
  limit: boundedInt(1, 200, 50, 'Maximum number of entries'),
  end: ops.HistoryEnd.optional(),
});

/** Query of GET /prices/{asset}. */
export const PricesQuery = z.object({ days: boundedInt(1, ops.MAX_PRICE_DAYS, 90, 'Window in days, ending at the as-of day') });

const AssetParam = z.object({ asset: z.string().min(1).max(64).describe('Asset id (e.g. `bitcoin`) or ticker (`btc`), any case') });
const ChainParam = z.object({ asset: z.string().min(1).max(64).describe('Chain: `eth`, `sol` or `hype`') });
const Factors = z.object({ include_factors: IncludeFactors });
const withFactors = (r: RouteParts) => ({ ...r.params, include_factors: r.query.include_factors === 'true' });
const chain = (r: RouteParts) => ({ chain: r.params.asset });

/**
 * Every /api/v1 route: one line per operation (path + parsing around it; the operation in
 * services/operations/ holds the policy, the schemas and the handler). The web dashboard
 * registers the same lines again under `/app/data` (src/web/routes.ts) with `only` (the
 * read-only market operations) and `hide` (not in the OpenAPI document).
 */
export async function v1Routes(
  app: FastifyInstance,
  opts: { services: Services; asOf: AsOf; only?: (op: Operation) => boolean; hide?: boolean },
): Promise<void> {
  const route = (op: Operation, spec: RouteSpec) => {
    if (opts.only && !opts.only(op)) return;
    operationRoute(app, opts.services, opts.asOf, op, opts.hide ? { ...spec, hide: true } : spec);
  };

  route(ops.listSignals, { method: 'GET', url: '/signals', querystring: Factors, input: withFactors });
  route(ops.getSignal, { method: 'GET', url: '/signals/:asset', params: AssetParam, querystring: Factors, input: withFactors });
  route(ops.getRegime, { method: 'GET', url: '/regime' });
  route(ops.listChainHealth, { method: 'GET', url: '/chain-health' });
  route(ops.getChainHealth, { method: 'GET', url: '/chain-health/:asset', params: ChainParam, input: chain });
  route(ops.getChainMetrics, { method: 'GET', url: '/chain-metrics/:asset', params: ChainParam, input: chain });
  route(ops.listAssets, { method: 'GET', url: '/assets' });
  route(ops.getSignalHistory, { method: 'GET', url: '/signal-history/:asset', params: AssetParam, querystring: HistoryQuery });
  route(ops.getStatus, { method: 'GET', url: '/status' });
  route(ops.getPrices, { method: 'GET', url: '/prices/:asset', params: AssetParam, querystring: PricesQuery });
  route(ops.getTrackRecord, { method: 'GET', url: '/track-record' });

  route(ops.createKey, { method: 'POST', url: '/keys/create', body: CreateKeyInput.optional() });
  route(ops.listKeys, {
    method: 'GET',
    url: '/keys',
    querystring: z.object({
      limit: boundedInt(1, KEY_PAGE.max, KEY_PAGE.default, 'The most keys a page holds (active keys first)'),
      cursor: PageCursor.optional(),
    }),
  });
  route(ops.revokeKey, { method: 'POST', url: '/keys/revoke', body: RevokeKeyInput });

  route(ops.createThesis, { method: 'POST', url: '/thesis', body: ThesisInputSchema });
  route(ops.listTheses, {
    method: 'GET',
    url: '/thesis',
    querystring: z.object({
      include_health: IncludeHealth,
      limit: boundedInt(1, THESIS_PAGE.max, THESIS_PAGE.default, 'Maximum number of theses'),
      cursor: ThesisCursor.optional(),
    }),
    input: (r) => ({ ...r.query, include_health: r.query.include_health === 'true' }),
  });
  route(ops.getThesis, { method: 'GET', url: '/thesis/:id', params: ThesisIdInput });
  route(ops.deleteThesis, { method: 'DELETE', url: '/thesis/:id', params: ThesisIdInput });
  route(ops.getThesisHealth, { method: 'GET', url: '/thesis/:id/health', params: ThesisIdInput });
}
