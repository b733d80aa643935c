import { and, desc, eq, sql } from 'drizzle-orm';
import type { Db } from './db.ts';
import { theses } from './schema.ts';

/** A stored thesis (prices in USD, `conditions` as the engine's ThesisCondition[]). */
export type ThesisRow = typeof theses.$inferSelect;

/**
 * Theses. Object-level authorization is in the queries themselves: every read or write of
 * a thesis is filtered by its owner's id.
 */
export class ThesisRepo {
  constructor(private readonly db: Db) {}

  /** Stores a new thesis for its owner. */
  async createThesis(t: Omit<ThesisRow, 'id' | 'createdAt' | 'updatedAt'>): Promise<ThesisRow> {
    const rows = await this.db.insert(theses).values(t).returning();
    return rows[0]!;
  }

  /**
   * The owner's theses, newest first (creation time, then id, descending), at most `limit`;
   * with `after`, only those that come after that position in this order (keyset paging:
   * a thesis deleted between two pages shifts nothing).
   * @param after `createdAt` exactly as read (PostgreSQL's text form, microseconds) and `id`
   *   of the last thesis of the previous page.
   */
  async listTheses(userId: string, limit: number, after?: { createdAt: string; id: string }): Promise<ThesisRow[]> {
    const owner = eq(theses.userId, userId);
    return this.db
      .select()
      .from(theses)
      .where(after ? and(owner, sql`(${theses.createdAt}, ${theses.id}) < (${after.createdAt}::timestamptz, ${after.id}::uuid)`) : owner)
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

  /** Deletes the owner's thesis. @returns false when the owner has no such thesis. */
  async deleteThesis(userId: string, id: string): Promise<boolean> {
    const rows = await this.db
      .delete(theses)
      .where(and(eq(theses.id, id), eq(theses.userId, userId)))
      .returning({ id: theses.id });
    return rows.length > 0;
  }
}
