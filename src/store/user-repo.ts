import { and, eq, gt, sql } from 'drizzle-orm';
import type { PlanTier } from '../auth/tiers.ts';
import type { Db } from './db.ts';
import { authSession, authUser } from './auth-schema.ts';
import { appUsers } from './schema.ts';

/**
 * Users as known to this service: `id` is the identity provider's `sub`, `tier` the user's
 * plan.
 */
export class UserRepo {
  constructor(private readonly db: Db) {}

  /** Creates the user on first sight (id = the identity provider's `sub`); refreshes the email. */
  async ensureUser(id: string, email: string | null): Promise<{ id: string; email: string | null; tier: PlanTier }> {
    const rows = await this.db
      .insert(appUsers)
      .values({ id, email })
      .onConflictDoUpdate({ target: appUsers.id, set: email ? { email, updatedAt: sql`now()` } : { updatedAt: sql`now()` } })
      .returning({ id: appUsers.id, email: appUsers.email, tier: appUsers.tier });
    return rows[0]!;
  }

  /**
   * Whether the embedded identity provider's sign-in session `sessionId` (a JWT's `sid`) is
   * still open for user `userId`: its row exists (sign-out and revoke delete it) and has not
   * expired.
   */
  async sessionActive(sessionId: string, userId: string): Promise<boolean> {
    const rows = await this.db
      .select({ id: authSession.id })
      .from(authSession)
      .where(and(eq(authSession.id, sessionId), eq(authSession.userId, userId), gt(authSession.expiresAt, sql`now()`)));
    return rows.length > 0;
  }

  /** The user's tier, or null when unknown. */
  async userTier(id: string): Promise<PlanTier | null> {
    const rows = await this.db.select({ tier: appUsers.tier }).from(appUsers).where(eq(appUsers.id, id));
    return rows[0]?.tier ?? null;
  }

  /**
   * Sets the plan of every user with this email (case-insensitive): users this service
   * already knows (`app_users`, filled at a user's first key or thesis) and users registered
   * with the embedded identity provider (`auth_user`) who have not created anything yet, for
   * whom the `app_users` row is created now with the same id (the JWT `sub`). With an external
   * identity provider `auth_user` stays empty: only users seen by this service can be found.
   * @returns how many users were changed (0 when no user has this email).
   */
  async setTierByEmail(email: string, tier: PlanTier): Promise<number> {
    return this.db.transaction(async (tx) => {
      const updated = await tx
        .update(appUsers)
        .set({ tier, updatedAt: sql`now()` })
        .where(sql`lower(${appUsers.email}) = lower(${email})`)
        .returning({ id: appUsers.id });
      const ids = new Set(updated.map((r) => r.id));
      const registered = await tx
        .select({ id: authUser.id, email: authUser.email })
        .from(authUser)
        .where(sql`lower(${authUser.email}) = lower(${email})`);
      for (const u of registered) {
        if (ids.has(u.id)) continue;
        await tx
          .insert(appUsers)
          .values({ id: u.id, email: u.email, tier })
          .onConflictDoUpdate({ target: appUsers.id, set: { tier, updatedAt: sql`now()` } });
        ids.add(u.id);
      }
      return ids.size;
    });
  }
}
