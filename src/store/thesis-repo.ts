import { and, desc, eq } from 'drizzle-orm';
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

  /** The owner's theses, newest first. */
  async listTheses(userId: string): Promise<ThesisRow[]> {
    return this.db.select().from(theses).where(eq(theses.userId, userId)).orderBy(desc(theses.createdAt));
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
