import { generateKey, hashKey, keyFormatError } from '../auth/api-keys.ts';
import type { PlanTier, Tier } from '../auth/tiers.ts';
import { ServiceError } from '../errors.ts';
import type { KeyRepo, KeyRow } from '../store/key-repo.ts';
import type { UserRepo } from '../store/user-repo.ts';
import type { CreatedKey, KeyView, RevokedKey } from './schemas/keys.ts';
import type { UsageTracker } from './usage.ts';

/** At most this many active keys per user (README, "Tiers and rate limits"). */
export const MAX_ACTIVE_KEYS = 5;

/** A signed-in user, as identified by a verified JWT. */
export interface UserIdentity {
  userId: string;
  email: string | null;
}

/** What a valid API key resolves to. */
export interface KeyCaller {
  keyId: string;
  userId: string;
  tier: Tier;
}

function iso(ts: string | null): string | null {
  return ts === null ? null : new Date(ts).toISOString();
}

/** Cached look-ups of active keys: at most this many, each trusted for at most this long. */
export const KEY_CACHE_MAX = 10_000;
export const KEY_CACHE_TTL_MS = 60_000;

/**
 * Self-service API keys: create (shown once), list, revoke, and resolve a presented key.
 *
 * Resolving a key costs a database query. With the embedded PGlite database only this
 * process can open the database, so every revocation and tier change passes through here:
 * active keys are then cached in memory (by SHA-256 digest; at most KEY_CACHE_MAX, each for
 * at most KEY_CACHE_TTL_MS) and evicted synchronously. With PostgreSQL, other instances can
 * revoke a key at any time and a revoked key must be refused on the next request everywhere,
 * so every request is looked up (one indexed query).
 */
export class KeyService {
  readonly #cache = new Map<string, { caller: KeyCaller; at: number }>();
  /** Bumped by every eviction, so a look-up that raced with one is not cached. */
  #generation = 0;

  /** @param cache true only when this process is the database's only user (PGlite). */
  constructor(
    private readonly keys: KeyRepo,
    private readonly users: UserRepo,
    private readonly usage: UsageTracker,
    private readonly cache = false,
  ) {}

  /** Drops the cached look-ups of one key, or all of them. */
  #evict(keyId: string | 'all'): void {
    this.#generation++;
    if (keyId === 'all') {
      this.#cache.clear();
      return;
    }
    for (const [hash, e] of this.#cache) if (e.caller.keyId === keyId) this.#cache.delete(hash);
  }

  /**
   * Creates a key for the user (created on first sight).
   * @returns the full key, shown this once, with its id, prefix, name, tier and creation time.
   * @throws ServiceError KEY_LIMIT_REACHED when the user already has 5 active keys.
   */
  async create(user: UserIdentity, name: string | undefined): Promise<CreatedKey> {
    const u = await this.users.ensureUser(user.userId, user.email);
    const k = generateKey();
    const row = await this.keys.createKey(user.userId, name ?? 'default', k.prefix, k.hash, MAX_ACTIVE_KEYS);
    if (!row) {
      throw new ServiceError('KEY_LIMIT_REACHED', `You already have ${MAX_ACTIVE_KEYS} active API keys; revoke one first`, {
        max_active_keys: MAX_ACTIVE_KEYS,
      });
    }
    return { id: row.id, key: k.key, prefix: row.prefix, name: row.name, tier: u.tier, created_at: iso(row.createdAt)! };
  }

  #view(r: KeyRow, tier: Tier, today: string): KeyView {
    const p = this.usage.pending(r.id, today);
    const storedToday = r.usageDay === today ? r.requestsDay : 0;
    const last =
      [iso(r.lastUsedAt), p.lastUsedAt]
        .filter((x): x is string => x !== null)
        .sort()
        .at(-1) ?? null;
    return {
      id: r.id,
      prefix: r.prefix,
      name: r.name,
      tier,
      status: r.status,
      usage: { requests_today: storedToday + p.requests, requests_total: r.requestsTotal + p.requests, last_used_at: last },
      created_at: iso(r.createdAt)!,
      revoked_at: iso(r.revokedAt),
    };
  }

  /** The user's keys with usage (this instance's unflushed counts included); never the key. */
  async list(user: UserIdentity): Promise<{ keys: KeyView[] }> {
    const tier = (await this.users.userTier(user.userId)) ?? 'free';
    const today = new Date().toISOString().slice(0, 10);
    return { keys: (await this.keys.listKeys(user.userId)).map((r) => this.#view(r, tier, today)) };
  }

  /**
   * Revokes one of the user's keys; idempotent.
   * @throws ServiceError NOT_FOUND when the user has no key with this id (also another user's key).
   */
  async revoke(user: UserIdentity, keyId: string): Promise<RevokedKey> {
    const row = await this.keys.revokeKey(user.userId, keyId);
    if (!row) throw new ServiceError('NOT_FOUND', `Key '${keyId}' not found`);
    this.#evict(row.id);
    return { id: row.id, status: 'revoked', revoked_at: iso(row.revokedAt)! };
  }

  /**
   * Sets a user's plan (operator command); every key of the user reports the new tier on its
   * next request, on every instance.
   * @returns the number of users changed (0 when no user has this email).
   */
  async setTier(email: string, tier: PlanTier): Promise<number> {
    const n = await this.users.setTierByEmail(email, tier);
    this.#evict('all');
    return n;
  }

  /**
   * Resolves a presented API key. Format and checksum are checked before any look-up.
   * @throws ServiceError UNAUTHORIZED (details.reason: malformed | bad_checksum | unknown | revoked).
   */
  async authenticate(key: string): Promise<KeyCaller> {
    const bad = keyFormatError(key);
    if (bad)
      throw new ServiceError('UNAUTHORIZED', bad === 'malformed' ? 'Malformed API key' : 'Invalid API key (checksum mismatch)', {
        reason: bad,
      });
    const hash = hashKey(key);
    const now = Date.now();
    const hit = this.cache ? this.#cache.get(hash) : undefined;
    if (hit && now - hit.at < KEY_CACHE_TTL_MS) return hit.caller;
    const generation = this.#generation;
    const found = await this.keys.findKey(hash);
    if (!found) throw new ServiceError('UNAUTHORIZED', 'Invalid API key', { reason: 'unknown' });
    if (found.status !== 'active') throw new ServiceError('UNAUTHORIZED', 'This API key has been revoked', { reason: 'revoked' });
    const caller: KeyCaller = { keyId: found.keyId, userId: found.userId, tier: found.tier };
    if (this.cache && generation === this.#generation) {
      this.#cache.delete(hash);
      if (this.#cache.size >= KEY_CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value!);
      this.#cache.set(hash, { caller, at: now });
    }
    return caller;
  }
}
