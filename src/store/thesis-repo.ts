import { and, count, desc, eq, getTableColumns, sql } from 'drizzle-orm';
import type { Db } from './db.ts';
import { appUsers, theses } from './schema.ts';

/** A stored thesis (prices in USD, `conditions` as the engine's ThesisCondition[]). */
export type ThesisRow = typeof theses.$inferSelect;

/**
 * Theses. Object-level authorization is in the queries themselves: every read or write of
 * a thesis is filtered by its owner's id.
 */
export class ThesisRepo {
  constructor(private readonly db: Db) {}

  /**
   * Stores a new thesis for its owner if the owner has fewer than `max` theses. Atomic: the
   * owner's `app_users` row (which must exist) is locked for the transaction, so concurrent
   * creations are serialized and can never exceed `max`. `t.id`: the new row's id when the
   * caller needs it before the answer (to undo a creation whose reply is lost); default a new
   * time-ordered id.
   * @returns the new row, or null when the owner already has `max` theses.
   */
  async createThesis(t: Omit<ThesisRow, 'id' | 'createdAt' | 'updatedAt'> & { id?: string }, max: number): Promise<ThesisRow | null> {
    return this.db.transaction(async (tx) => {
      await tx.select({ id: appUsers.id }).from(appUsers).where(eq(appUsers.id, t.userId)).for('update');
      const [{ n } = { n: 0 }] = await tx.select({ n: count() }).from(theses).where(eq(theses.userId, t.userId));
      if (n >= max) return null;
      const rows = await tx.insert(theses).values(t).returning();
      return rows[0]!;
    });
  }

  /**
   * The owner's theses, newest first (creation time, then id, descending), at most `limit`;
   * with `after`, only those that come after that position in this order (keyset paging:
   * a thesis deleted between two pages shifts nothing). Each row carries `position`, its
   * creation time as `YYYY-MM-DD HH24:MI:SS.US` in UTC (exact to the microsecond, whatever the
   * session's DateStyle or time zone), for the next page's `after`.
   * @param after `position` and `id` of the last thesis of the previous page.
   */
  async listTheses(userId: string, limit: number, after?: { position: string; id: string }): Promise<(ThesisRow & { position: string })[]> {
    const owner = eq(theses.userId, userId);
    return this.db
      .select({
        ...getTableColumns(theses),
        position: sql<string>`to_char(${theses.createdAt} at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`,
      })
      .from(theses)
      .where(
        after
          ? and(owner, sql`(${theses.createdAt}, ${theses.id}) < ((${after.position}::timestamp at time zone 'UTC'), ${after.id}::uuid)`)
          : owner,
      )
      .orderBy(desc(theses.createdAt), desc(theses.id))
      .limit(limit);
  }

  /** The owner's thesis, or null (also when it belongs to someone else). */
  async getThesis(userId: string, id: string): Promise<ThesisRow | null> {
    const rows = await this.db
      .select()
      .from(theses)
      .where(and(eq(theses.id, id), eq(theses.userId, userId)));
    return rows[0] ?? null;
  }

  /**
   * Deletes the owner's thesis.
   * @returns the deleted thesis's id as stored (lower case, whatever case `id` was given in),
   *   or null when the owner has no such thesis.
   */
  async deleteThesis(userId: string, id: string): Promise<string | null> {
    const rows = await this.db
      .delete(theses)
      .where(and(eq(theses.id, id), eq(theses.userId, userId)))
      .returning({ id: theses.id });
    return rows[0]?.id ?? null;
  }
}
