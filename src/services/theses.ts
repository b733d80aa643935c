import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { evaluateThesis, stopHit, thesisHorizon, type ThesisCondition, type ThesisMetric, type ThesisSnapshot } from '../engine/thesis.ts';
import { ASSETS, CHAINS, resolveAsset, resolveChain } from '../providers/assets.ts';
import { invalidField, ServiceError } from '../errors.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { discardInBackground } from './discard.ts';
import { timeOrderedId } from '../store/schema.ts';
import type { ThesisRepo, ThesisRow } from '../store/thesis-repo.ts';
import { isoTimestamp as iso } from '../store/timestamps.ts';
import type { UserRepo } from '../store/user-repo.ts';
import type { MarketService } from './market.ts';
import { type ListedThesis, MAX_THESES, type Thesis, type ThesisHealthData, type ThesisInputSchema } from './schemas/theses.ts';

function notFound(id: string): ServiceError {
  return new ServiceError(
    'NOT_FOUND',
    `Thesis '${id}' not found among your theses (GET /api/v1/thesis lists them, as does the dashboard's /account page)`,
  );
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
   * @throws ServiceError INVALID_PARAMETER when the asset is not supported (field `asset`), or
   *   when a condition asks for the chain health score of an asset without a chain (field
   *   `conditions.N.metric`), or the funding rate of an asset without a funding-rate source
   *   (GET /api/v1/assets, `capabilities.funding_rate`): it could never be evaluated; or when
   *   the stop is already hit at the current price (field `stop_price`, see #refuseHitStop);
   *   ServiceError THESIS_LIMIT_REACHED (409, details `{max_theses}`) when the user already
   *   has MAX_THESES theses.
   */
  async create(userId: string, email: string | null, input: z.output<typeof ThesisInputSchema>): Promise<Thesis> {
    const a = resolveAsset(input.asset);
    if (!a)
      throw invalidField(
        'asset',
        `asset '${input.asset}' is not supported; give one of ${ASSETS.map((x) => `${x.asset} (${x.symbol})`).join(', ')}, by id or ticker`,
        {
          assets: ASSETS.map((x) => x.asset),
        },
      );
    // A condition on a metric the asset does not have could never be evaluated: a chain
    // health score without a chain, a funding rate without funding data.
    const has = this.market.dataCapabilities(a);
    const lacking: [ThesisMetric, boolean, string][] = [
      [
        'chain_health_score',
        has.chain_health,
        `has no chain health score (only ${CHAINS.map((c) => c.chain.toUpperCase()).join(', ')} have one)`,
      ],
      [
        'funding_rate',
        has.funding_rate,
        `has no funding-rate data as of ${this.market.asOf} (GET /api/v1/assets lists capabilities.funding_rate per asset)`,
      ],
    ];
    for (const [metric, available, why] of lacking) {
      const i = available ? -1 : input.conditions.findIndex((c) => c.metric === metric);
      if (i >= 0) throw invalidField(`conditions.${i}.metric`, `${a.symbol} ${why}; use another metric`);
    }
    if (input.stop_price != null) this.#refuseHitStop(a.asset, a.symbol, input.direction, input.stop_price);
    const conditions: ThesisCondition[] = input.conditions.map((c) => ({
      id: c.id ?? randomUUID(),
      metric: c.metric,
      operator: c.operator,
      value: c.value,
      kind: c.kind,
    }));
    await this.users.ensureUser(userId, email);
    const id = timeOrderedId();
    let row: ThesisRow | null;
    try {
      row = await this.repo.createThesis(
        {
          id,
          userId,
          asset: a.asset,
          direction: input.direction,
          title: input.title,
          entryPrice: input.entry_price ?? null,
          targetPrice: input.target_price ?? null,
          stopPrice: input.stop_price ?? null,
          horizonDays: input.horizon_days ?? null,
          conditions,
        },
        MAX_THESES,
      );
    } catch (e) {
      // A failed request leaves no thesis: the insert may have committed though its reply was
      // lost (a 503 after the database timed out), and the user's retry would store a second one.
      discardInBackground(() => this.repo.deleteThesis(userId, id));
      throw e;
    }
    if (!row)
      throw new ServiceError(
        'THESIS_LIMIT_REACHED',
        `Your account has reached its limit of ${MAX_THESES} theses; delete one you no longer follow first (DELETE /api/v1/thesis/{id}, ids from GET /api/v1/thesis, or on the dashboard's /account page)`,
        { max_theses: MAX_THESES },
      );
    return this.#view(row);
  }

  /**
   * Refuses a stop the current price has already reached (a long's stop at or above it, a
   * short's at or below it): the thesis would be invalidated as soon as it is stored. The
   * price is the one its health reads (GET /signals/{asset}: the close of the as-of day).
   * Without a current price (the asset's prices missing or stale) there is nothing to compare
   * with, and the stop is accepted: the health then says why it cannot be told.
   * @throws ServiceError INVALID_PARAMETER (field `stop_price`, with `price_usd` and `as_of`).
   */
  #refuseHitStop(asset: string, symbol: string, direction: Thesis['direction'], stop: number): void {
    let price: number;
    let asOf: string;
    try {
      ({ price_usd: price, as_of: asOf } = this.market.signal(asset, false).value);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'NOT_FOUND') return;
      throw err;
    }
    if (!stopHit(direction, price, stop)) return;
    const long = direction === 'long';
    throw invalidField(
      'stop_price',
      `${stop} is at or ${long ? 'above' : 'below'} ${symbol}'s current price ${price} USD (as of ${asOf}), so this ${direction} thesis would be invalidated at once; give a stop_price ${long ? 'below' : 'above'} ${price}, or leave it out`,
      { price_usd: price, as_of: asOf },
    );
  }

  /**
   * One page of the user's theses, newest first: at most `limit`, after the position
   * `cursor` names (the `next_cursor` of the previous page; absent for the first page).
   * `next_cursor` is null on the last page. With `withHealth`, each thesis has its `health`
   * as GET /thesis/{id}/health gives it (one request for a page, as the dashboard shows it).
   * @throws ServiceError INVALID_PARAMETER (field `cursor`) for a cursor this service did not give.
   */
  async list(
    userId: string,
    opts: { withHealth?: boolean; limit: number; cursor?: string },
  ): Promise<{ theses: ListedThesis[]; limit: number; next_cursor: string | null }> {
    const { limit } = opts;
    const after = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor, false);
    // One query for the page and for whether another follows: limit + 1 rows.
    const rows = await this.repo.listTheses(userId, limit + 1, after);
    const page = rows.slice(0, limit);
    const next_cursor = rows.length > limit ? encodeCursor(page.at(-1)!) : null;
    const theses = page.map((r) => this.#view(r));
    if (!opts.withHealth) return { theses, limit, next_cursor };
    const now = new Date();
    return {
      theses: theses.map((t) => {
        try {
          return { ...t, health: this.#evaluate(t, now) };
        } catch (err) {
          // One thesis whose asset has no current data does not fail the list: it says why.
          // (#evaluate reads no database; anything but a ServiceError fails the request, logged.)
          if (!(err instanceof ServiceError)) throw err;
          return { ...t, health: null, health_error: { code: err.code, message: err.message } };
        }
      }),
      limit,
      next_cursor,
    };
  }

  /** @throws ServiceError NOT_FOUND when the user has no thesis with this id (also someone else's). */
  async get(userId: string, id: string): Promise<Thesis> {
    if (!UUID.test(id)) throw notFound(id);
    const r = await this.repo.getThesis(userId, id);
    if (!r) throw notFound(id);
    return this.#view(r);
  }

  /**
   * Deletes the user's thesis. The answer's `id` is the thesis's own (lower case), as GET and
   * /health give it, also when the path had it in capitals.
   * @throws ServiceError NOT_FOUND as `get`.
   */
  async delete(userId: string, id: string): Promise<{ id: string; deleted: true }> {
    const deleted = UUID.test(id) ? await this.repo.deleteThesis(userId, id) : null;
    if (deleted === null) throw notFound(id);
    return { id: deleted, deleted: true };
  }

  /**
   * The current values of the condition metrics for an asset, from the same service data as
   * the REST endpoints: signal entry (price, 7-day change, score, rsi and funding-rate
   * factors), the BTC regime and Fear & Greed, and the chain health score of the asset's
   * chain. A value the data lacks is null. `stale_reason` joins the stale reasons of the
   * answers read (GET /signals/{asset}, /regime, /chain-health/{chain}); null when all are fresh.
   */
  snapshot(asset: string): { snapshot: ThesisSnapshot; as_of: string; stale_reason: string | null } {
    const s = this.market.signal(asset, true).value;
    const factor = (name: string): number | null => {
      const v = s.factors?.find((f) => f.name === name)?.value;
      return typeof v === 'number' ? v : null;
    };
    const reasons = new Set<string>();
    const note = (x: { stale: boolean; stale_reason: string | null }) => {
      if (x.stale && x.stale_reason) for (const part of x.stale_reason.split('; ')) reasons.add(part);
    };
    note(s);
    let regime: ThesisSnapshot['regime'] = null;
    let fearGreed: number | null = null;
    try {
      const r = this.market.regime().value;
      note(r);
      regime = r.regime;
      fearGreed = r.conditions.fear_greed?.value ?? null;
    } catch {
      // No BTC data at the as-of day: regime and Fear & Greed stay null (reported as unevaluable).
    }
    let chainScore: number | null = null;
    if (resolveChain(asset)) {
      const c = this.market.chainHealthOf(asset).value;
      note(c);
      chainScore = c.score ?? null;
    }
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
      stale_reason: reasons.size ? [...reasons].join('; ') : null,
    };
  }

  /**
   * Evaluates the user's thesis against the current data (method: docs/methodology.md,
   * "Thesis health").
   * @throws ServiceError NOT_FOUND as `get`.
   */
  async health(userId: string, id: string): Promise<ThesisHealthData> {
    return this.#evaluate(await this.get(userId, id), new Date());
  }

  /**
   * The health of a stored thesis against the current data, evaluated at `now`. Reads only
   * the in-memory market answers (no database).
   * @throws ServiceError SERVICE_UNAVAILABLE when the thesis's asset has no current signal
   *   (its prices missing or stale): the thesis exists, its health cannot be told now.
   */
  #evaluate(t: Thesis, now: Date): ThesisHealthData {
    let read: ReturnType<ThesisService['snapshot']>;
    try {
      read = this.snapshot(t.asset);
    } catch (err) {
      if (!(err instanceof ServiceError) || err.code !== 'NOT_FOUND') throw err;
      throw new ServiceError(
        'SERVICE_UNAVAILABLE',
        `Thesis '${t.id}' cannot be evaluated now: ${err.message}`,
        { ...err.details, thesis_id: t.id },
        { expected: true },
      );
    }
    const { snapshot, as_of, stale_reason } = read;
    const h = evaluateThesis(
      {
        direction: t.direction,
        entry_price: t.entry_price,
        target_price: t.target_price,
        stop_price: t.stop_price,
        conditions: t.conditions,
      },
      snapshot,
    );
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
      horizon: thesisHorizon(new Date(t.created_at), t.horizon_days, now),
      current: snapshot,
      evaluated_at: now.toISOString(),
      as_of,
      stale: stale_reason !== null,
      stale_reason,
    };
  }
}
