import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  evaluateThesis,
  THESIS_CONDITION_KINDS,
  THESIS_DIRECTIONS,
  THESIS_METRICS,
  THESIS_OPERATORS,
  THESIS_STATUSES,
  type ThesisCondition,
  type ThesisSnapshot,
} from '../engine/thesis.ts';
import { resolveAsset, resolveChain } from '../providers/assets.ts';
import { ServiceError } from '../http/errors.ts';
import type { ThesisRepo, ThesisRow } from '../store/thesis-repo.ts';
import type { UserRepo } from '../store/user-repo.ts';
import type { MarketService } from './market.ts';
import { SignalLevel, RegimeLevel, safeText } from './schemas.ts';

/** Metrics whose condition value is a level name rather than a number. */
const CATEGORICAL: Record<string, readonly string[]> = { signal: SignalLevel.options, regime: RegimeLevel.options };

/** A condition as sent by the client (its id is assigned by the service when absent). */
export const ConditionInputSchema = z
  .object({
    id: safeText(1, 64).optional().describe('Your id for the condition; generated when absent'),
    metric: z.enum(THESIS_METRICS).describe('What the condition tests'),
    operator: z.enum(THESIS_OPERATORS),
    value: z
      .union([z.number().finite(), safeText(1, 32)])
      .describe('A number for numeric metrics (price_usd USD, change_7d_pct %, rsi_14 0..100, signal_score -1..1, fear_greed 0..100, funding_rate fraction per 8 h, chain_health_score 0..100); a level for signal/regime'),
    kind: z.enum(THESIS_CONDITION_KINDS).default('warning').describe('invalidation ends the thesis; warning lowers its health'),
  })
  .strict()
  .superRefine((c, ctx) => {
    const levels = CATEGORICAL[c.metric];
    if (levels) {
      if (typeof c.value !== 'string' || !levels.includes(c.value)) {
        ctx.addIssue({ code: 'custom', path: ['value'], message: `must be one of ${levels.join(', ')} for metric '${c.metric}'` });
      }
    } else if (typeof c.value !== 'number') {
      ctx.addIssue({ code: 'custom', path: ['value'], message: `must be a number for metric '${c.metric}'` });
    }
  });

const Price = z.number().finite().positive().describe('USD');

/** Body of POST /thesis. */
export const ThesisInputSchema = z
  .object({
    asset: safeText(1, 64).describe('Asset id or ticker, e.g. bitcoin or BTC'),
    direction: z.enum(THESIS_DIRECTIONS),
    title: safeText(1, 200),
    entry_price: Price.nullable().optional(),
    target_price: Price.nullable().optional(),
    stop_price: Price.nullable().optional(),
    horizon_days: z.number().int().min(1).max(3650).nullable().optional(),
    conditions: z.array(ConditionInputSchema).max(20).default([]),
  })
  .strict()
  .superRefine((t, ctx) => {
    const ids = new Set<string>();
    t.conditions.forEach((c, i) => {
      if (c.id === undefined) return;
      if (ids.has(c.id)) ctx.addIssue({ code: 'custom', path: ['conditions', i, 'id'], message: `duplicate condition id '${c.id}'` });
      ids.add(c.id);
    });
    if (t.entry_price != null && t.stop_price != null) {
      const wrongSide = t.direction === 'long' ? t.stop_price >= t.entry_price : t.stop_price <= t.entry_price;
      if (wrongSide) ctx.addIssue({ code: 'custom', path: ['stop_price'], message: `must be ${t.direction === 'long' ? 'below' : 'above'} entry_price for a ${t.direction} thesis` });
    }
    if (t.entry_price != null && t.target_price != null) {
      const wrongSide = t.direction === 'long' ? t.target_price <= t.entry_price : t.target_price >= t.entry_price;
      if (wrongSide) ctx.addIssue({ code: 'custom', path: ['target_price'], message: `must be ${t.direction === 'long' ? 'above' : 'below'} entry_price for a ${t.direction} thesis` });
    }
  });
/** A POST /thesis body as sent (before defaults). */
export type ThesisInputBody = z.input<typeof ThesisInputSchema>;

/** A stored condition (DECISIONS.md "Thesis"). */
export const ConditionSchema = z.object({
  id: z.string(),
  metric: z.enum(THESIS_METRICS),
  operator: z.enum(THESIS_OPERATORS),
  value: z.union([z.number(), z.string()]),
  kind: z.enum(THESIS_CONDITION_KINDS),
});

/** A stored thesis (DECISIONS.md "Thesis"). */
export const ThesisSchema = z.object({
  id: z.uuid(),
  asset: z.string(),
  symbol: z.string(),
  name: z.string(),
  direction: z.enum(THESIS_DIRECTIONS),
  title: z.string(),
  entry_price: z.number().nullable(),
  target_price: z.number().nullable(),
  stop_price: z.number().nullable(),
  horizon_days: z.number().int().nullable(),
  conditions: z.array(ConditionSchema),
  created_at: z.string(),
  updated_at: z.string(),
});
/** A stored thesis as returned by the thesis routes. */
export type Thesis = z.infer<typeof ThesisSchema>;

/** `data` of GET /thesis. */
export const ThesisListSchema = z.object({ theses: z.array(ThesisSchema) });

/** GET /thesis/{id}/health (DECISIONS.md "Thesis"; method in docs/methodology.md). */
export const ThesisHealthSchema = z.object({
  thesis_id: z.uuid(),
  asset: z.string(),
  direction: z.enum(THESIS_DIRECTIONS),
  health_score: z.number().min(0).max(100).nullable().describe('0..100; null when nothing could be evaluated'),
  status: z.enum(THESIS_STATUSES),
  action_required: z.boolean().describe('An invalidation holds, the stop is hit, or the score is below 40'),
  triggered_conditions: z.array(ConditionSchema.extend({ current_value: z.union([z.number(), z.string()]) })),
  unevaluable_conditions: z.array(ConditionSchema.extend({ reason: z.string() })).describe('Conditions whose metric has no data for this asset (reported, not guessed)'),
  components: z.array(z.object({ name: z.string(), score: z.number(), weight: z.number(), detail: z.string() })),
  stop_hit: z.boolean().nullable(),
  target_hit: z.boolean().nullable(),
  current: z
    .object({
      price_usd: z.number().nullable(),
      change_7d_pct: z.number().nullable(),
      rsi_14: z.number().nullable(),
      signal: SignalLevel.nullable(),
      signal_score: z.number().nullable(),
      regime: RegimeLevel.nullable(),
      fear_greed: z.number().nullable(),
      funding_rate: z.number().nullable(),
      chain_health_score: z.number().nullable(),
    })
    .describe('The metric values the conditions were evaluated against'),
  evaluated_at: z.string().describe('Wall-clock time of the evaluation, ISO 8601 UTC'),
  as_of: z.string().describe('Day of the market data used'),
});
/** `data` of GET /thesis/{id}/health. */
export type ThesisHealthData = z.infer<typeof ThesisHealthSchema>;

function iso(ts: string): string {
  return new Date(ts).toISOString();
}

function notFound(id: string): ServiceError {
  return new ServiceError('NOT_FOUND', `Thesis '${id}' not found`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Theses: a user's trade ideas, stored per owner and evaluated against the current market
 * data. Every read and delete is filtered by owner in the SQL itself, so another user's
 * thesis is indistinguishable from a missing one (404 NOT_FOUND).
 */
export class ThesisService {
  constructor(
    private readonly repo: ThesisRepo,
    private readonly users: UserRepo,
    private readonly market: MarketService,
  ) {}

  #view(r: ThesisRow): Thesis {
    const a = resolveAsset(r.asset)!;
    return {
      id: r.id,
      asset: a.asset,
      symbol: a.symbol,
      name: a.name,
      direction: r.direction,
      title: r.title,
      entry_price: r.entryPrice,
      target_price: r.targetPrice,
      stop_price: r.stopPrice,
      horizon_days: r.horizonDays,
      // jsonb does not keep key order: rebuild each condition in the documented order.
      conditions: r.conditions.map((c) => ({ id: c.id, metric: c.metric, operator: c.operator, value: c.value, kind: c.kind })),
      created_at: iso(r.createdAt),
      updated_at: iso(r.updatedAt),
    };
  }

  /**
   * Stores a thesis for the user (already validated by ThesisInputSchema).
   * @throws ServiceError INVALID_PARAMETER when the asset is not supported (field `asset`).
   */
  async create(userId: string, email: string | null, input: z.output<typeof ThesisInputSchema>): Promise<Thesis> {
    const a = resolveAsset(input.asset);
    if (!a) throw new ServiceError('INVALID_PARAMETER', `Invalid body field 'asset': asset '${input.asset}' is not supported (see GET /api/v1/assets)`, { field: 'asset' });
    const conditions: ThesisCondition[] = input.conditions.map((c) => ({ id: c.id ?? randomUUID(), metric: c.metric, operator: c.operator, value: c.value, kind: c.kind }));
    await this.users.ensureUser(userId, email);
    const row = await this.repo.createThesis({
      userId,
      asset: a.asset,
      direction: input.direction,
      title: input.title,
      entryPrice: input.entry_price ?? null,
      targetPrice: input.target_price ?? null,
      stopPrice: input.stop_price ?? null,
      horizonDays: input.horizon_days ?? null,
      conditions,
    });
    return this.#view(row);
  }

  /** The user's theses, newest first. */
  async list(userId: string): Promise<{ theses: Thesis[] }> {
    return { theses: (await this.repo.listTheses(userId)).map((r) => this.#view(r)) };
  }

  /** @throws ServiceError NOT_FOUND when the user has no thesis with this id (also someone else's). */
  async get(userId: string, id: string): Promise<Thesis> {
    if (!UUID.test(id)) throw notFound(id);
    const r = await this.repo.getThesis(userId, id);
    if (!r) throw notFound(id);
    return this.#view(r);
  }

  /** Deletes the user's thesis. @throws ServiceError NOT_FOUND as `get`. */
  async delete(userId: string, id: string): Promise<{ id: string; deleted: true }> {
    if (!UUID.test(id) || !(await this.repo.deleteThesis(userId, id))) throw notFound(id);
    return { id, deleted: true };
  }

  /**
   * The current values of the condition metrics for an asset, from the same service data as
   * the REST endpoints: signal entry (price, 7-day change, score, rsi and funding-rate
   * factors), the BTC regime and Fear & Greed, and the chain health score of the asset's
   * chain. A value the data lacks is null.
   */
  snapshot(asset: string): { snapshot: ThesisSnapshot; as_of: string } {
    const s = this.market.signal(asset, true).value;
    const factor = (name: string): number | null => {
      const v = s.factors?.find((f) => f.name === name)?.value;
      return typeof v === 'number' ? v : null;
    };
    let regime: ThesisSnapshot['regime'] = null;
    let fearGreed: number | null = null;
    try {
      const r = this.market.regime().value;
      regime = r.regime;
      fearGreed = r.conditions.fear_greed?.value ?? null;
    } catch {
      // No BTC data at the as-of day: regime and Fear & Greed stay null (reported as unevaluable).
    }
    let chainScore: number | null = null;
    if (resolveChain(asset)) chainScore = this.market.chainHealthOf(asset).value.score ?? null;
    return {
      snapshot: {
        price_usd: s.price_usd,
        change_7d_pct: s.change_7d_pct,
        rsi_14: factor('rsi'),
        signal: s.signal,
        signal_score: s.score,
        regime,
        fear_greed: fearGreed,
        funding_rate: factor('funding_rate'),
        chain_health_score: chainScore,
      },
      as_of: s.as_of,
    };
  }

  /**
   * Evaluates the user's thesis against the current data (method: docs/methodology.md,
   * "Thesis health").
   * @throws ServiceError NOT_FOUND as `get`.
   */
  async health(userId: string, id: string): Promise<ThesisHealthData> {
    const t = await this.get(userId, id);
    const { snapshot, as_of } = this.snapshot(t.asset);
    const h = evaluateThesis({ direction: t.direction, entry_price: t.entry_price, target_price: t.target_price, stop_price: t.stop_price, conditions: t.conditions }, snapshot);
    return {
      thesis_id: t.id,
      asset: t.asset,
      direction: t.direction,
      health_score: h.health_score,
      status: h.status,
      action_required: h.action_required,
      triggered_conditions: h.triggered_conditions,
      unevaluable_conditions: h.unevaluable_conditions,
      components: h.components,
      stop_hit: h.stop_hit,
      target_hit: h.target_hit,
      current: snapshot,
      evaluated_at: new Date().toISOString(),
      as_of,
    };
  }
}
