import { and, count, desc, eq, sql } from 'drizzle-orm';
import type { PlanTier } from '../auth/tiers.ts';
import type { Database, Db } from './db.ts';
import { apiKeys, appUsers } from './schema.ts';

/** A key as listed to its owner (never the key itself). */
export type KeyRow = Pick<
  typeof apiKeys.$inferSelect,
  'id' | 'userId' | 'name' | 'prefix' | 'status' | 'createdAt' | 'revokedAt' | 'lastUsedAt' | 'requestsTotal' | 'usageDay' | 'requestsDay'
>;

/**
 * A key's place in its owner's list (KeyRepo.listKeys): `rank` 1 for an active key, 0 for a
 * revoked one; `position` its creation time, UTC to the microsecond (`YYYY-MM-DD
 * HH24:MI:SS.US`); and its id, which orders keys created in the same microsecond.
 */
export interface KeyPosition {
  rank: number;
  position: string;
  id: string;
}

/** What an API key resolves to on a request. */
export interface KeyIdentity {
  keyId: string;
  userId: string;
  status: KeyRow['status'];
  tier: PlanTier;
}

/** One batch of usage for a key, as counted in memory between flushes. */
export interface UsageDelta {
  keyId: string;
  requests: number;
  lastUsedAt: string;
  /** UTC day the requests were made (YYYY-MM-DD). */
  day: string;
}

const keyColumns = {
  id: apiKeys.id,
  userId: apiKeys.userId,
  name: apiKeys.name,
  prefix: apiKeys.prefix,
  status: apiKeys.status,
  createdAt: apiKeys.createdAt,
  revokedAt: apiKeys.revokedAt,
  lastUsedAt: apiKeys.lastUsedAt,
  requestsTotal: apiKeys.requestsTotal,
  usageDay: apiKeys.usageDay,
  requestsDay: apiKeys.requestsDay,
};

/**
 * API keys and their usage counters. Object-level authorization is in the queries
 * themselves: every read or write of a key on behalf of a user is filtered by its owner's id.
 */
export class KeyRepo {
  /**
   * @param db the database.
   * @param kind its backend (`Database.kind`). On 'pglite' `addUsage` may write a single day
   *   without a transaction. On 'postgres' (the default) it keeps one, because a reply lost to
   *   the client's query timeout must leave nothing committed: the queued ROLLBACK undoes the
   *   statement, and the usage tracker re-queues the chunk.
   */
  constructor(
    private readonly db: Db,
    private readonly kind: Database['kind'] = 'postgres',
  ) {}

  /**
   * Creates a key if the user has fewer than `max` active keys. Atomic: the user's row is
   * locked for the transaction, so concurrent creations are serialized and can never exceed
   * `max`.
   * @returns the new key row, or null when the limit is reached.
   */
  async createKey(userId: string, name: string, prefix: string, keyHash: string, max: number): Promise<KeyRow | null> {
    return this.db.transaction(async (tx) => {
      await tx.select({ id: appUsers.id }).from(appUsers).where(eq(appUsers.id, userId)).for('update');
      const [{ n } = { n: 0 }] = await tx
        .select({ n: count() })
        .from(apiKeys)
        .where(and(eq(apiKeys.userId, userId), eq(apiKeys.status, 'active')));
      if (n >= max) return null;
      const rows = await tx.insert(apiKeys).values({ userId, name, prefix, keyHash }).returning(keyColumns);
      return rows[0]!;
    });
  }

  /**
   * Deletes the key with digest `keyHash`, whatever its status: for a key whose creation
   * answered with an error (a reply lost after the commit), which was never shown to anyone.
   * @returns whether a row was deleted.
   */
  async deleteByHash(keyHash: string): Promise<boolean> {
    const rows = await this.db.delete(apiKeys).where(eq(apiKeys.keyHash, keyHash)).returning({ id: apiKeys.id });
    return rows.length > 0;
  }

  /**
   * The user's keys in list order: active keys first, then revoked ones, each newest first
   * (creation time, then id). Each row carries its `position` in that order (KeyPosition).
   * @param opts.limit at most this many rows (default: all);
   * @param opts.after only the keys after this position (keyset paging: the last row of the
   *   previous page).
   */
  async listKeys(userId: string, opts: { limit?: number; after?: KeyPosition } = {}): Promise<(KeyRow & KeyPosition)[]> {
    const active = sql<number>`(case when ${apiKeys.status} = 'active' then 1 else 0 end)`;
    const owner = eq(apiKeys.userId, userId);
    const after = opts.after;
    const q = this.db
      .select({
        ...keyColumns,
        rank: active,
        position: sql<string>`to_char(${apiKeys.createdAt} at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`,
      })
      .from(apiKeys)
      .where(
        after
          ? and(
              owner,
              sql`(${active}, ${apiKeys.createdAt}, ${apiKeys.id}) < (${after.rank}::int, (${after.position}::timestamp at time zone 'UTC'), ${after.id}::uuid)`,
            )
          : owner,
      )
      .orderBy(desc(active), desc(apiKeys.createdAt), desc(apiKeys.id));
    const rows = await (opts.limit === undefined ? q : q.limit(opts.limit));
    return rows.map((r) => ({ ...r, rank: Number(r.rank) }));
  }

  /**
   * Revokes the user's key; revoking a revoked key changes nothing (idempotent).
   * @returns the key after the call, or null when the user has no such key.
   */
  async revokeKey(userId: string, keyId: string): Promise<KeyRow | null> {
    const updated = await this.db
      .update(apiKeys)
      .set({ status: 'revoked', revokedAt: sql`now()` })
      .where(and(eq(apiKeys.id, keyId), eq(apiKeys.userId, userId), eq(apiKeys.status, 'active')))
      .returning(keyColumns);
    if (updated[0]) return updated[0];
    const rows = await this.db
      .select(keyColumns)
      .from(apiKeys)
      .where(and(eq(apiKeys.id, keyId), eq(apiKeys.userId, userId)));
    return rows[0] ?? null;
  }

  /** Resolves a key digest to its key, owner, status and the owner's tier. */
  async findKey(keyHash: string): Promise<KeyIdentity | null> {
    const rows = await this.db
      .select({ keyId: apiKeys.id, userId: apiKeys.userId, status: apiKeys.status, tier: appUsers.tier })
      .from(apiKeys)
      .innerJoin(appUsers, eq(appUsers.id, apiKeys.userId))
      .where(eq(apiKeys.keyHash, keyHash));
    return rows[0] ?? null;
  }

  /**
   * Adds counted usage to the keys: one UPDATE per UTC day in the batch (usually one), in one
   * transaction, so a rejection leaves nothing written (the usage tracker re-queues the chunk).
   * On PGlite (in the process, no client timeout) a single day is one statement without BEGIN/COMMIT: atomic by
   * itself, and with no client timeout there a rejection is the statement's own failure. That
   * is two round trips fewer, about 0.7 ms of main thread per statement (docs/benchmarks.md,
   * "Eleventh session"). `deltas` hold at most one entry per key and day (UsageTracker's).
   */
  async addUsage(deltas: UsageDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    const byDay = new Map<string, { id: string; requests: number; last_used: string }[]>();
    for (const d of deltas) {
      const rows = byDay.get(d.day) ?? [];
      rows.push({ id: d.keyId, requests: d.requests, last_used: d.lastUsedAt });
      byDay.set(d.day, rows);
    }
    // Older days first, so usage_day ends on the newest day.
    const days = [...byDay.keys()].sort();
    const write = (db: Pick<Db, 'execute'>, day: string) => {
      const rows = byDay.get(day)!;
      const json = JSON.stringify(rows);
      // The key ids again as an array: `k.id = any(...)` lets the planner find the rows through
      // the primary key. Joined with the recordset alone (estimated at 100 rows, no statistics
      // on PGlite), every statement read the whole table: ~1.2 ms of a chunk on PGlite at
      // 10,000 keys, whatever the chunk's size.
      const idList = `{${rows.map((r) => r.id).join(',')}}`;
      return db.execute(sql`
          update ${apiKeys} as k set
            requests_total = k.requests_total + v.requests,
            requests_day = case when k.usage_day = ${day}::date then k.requests_day + v.requests
                                when k.usage_day > ${day}::date then k.requests_day
                                else v.requests end,
            usage_day = greatest(coalesce(k.usage_day, ${day}::date), ${day}::date),
            last_used_at = greatest(coalesce(k.last_used_at, v.last_used), v.last_used)
          from jsonb_to_recordset(${json}::jsonb) as v(id uuid, requests integer, last_used timestamptz)
          where k.id = v.id and k.id = any(${idList}::uuid[])`);
    };
    if (this.kind === 'pglite' && days.length === 1) {
      await write(this.db, days[0]!);
      return;
    }
    await this.db.transaction(async (tx) => {
      for (const day of days) await write(tx, day);
    });
  }
}
