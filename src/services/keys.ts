import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { generateKey, hashKey, keyFormatError } from '../auth/api-keys.ts';
import type { PlanTier, Tier } from '../auth/tiers.ts';
import { ServiceError } from '../errors.ts';
import type { TierRateLimiter } from '../rate-limit/limiter.ts';
import type { Coordination } from '../store/db.ts';
import type { KeyPosition, KeyRepo, KeyRow } from '../store/key-repo.ts';
import { isoTimestamp as iso } from '../store/timestamps.ts';
import type { UserRepo } from '../store/user-repo.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { discardInBackground } from './discard.ts';
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

/** Default of KEY_CACHE_MAX: at most this many verified active keys per instance. */
export const KEY_CACHE_MAX = 100_000;
/**
 * A cached key is looked up again after a time drawn at random between this and twice this
 * (ms), so that keys cached together do not all expire together. Revocations and plan
 * changes do not wait for it: they evict at once (`KeyService`).
 */
export const KEY_CACHE_TTL_MS = 10 * 60_000;

/** A verified active key in the cache: its caller, and the tier epoch (limiter) it was read under. */
export interface CachedKey {
  caller: KeyCaller;
  /** The Redis tier epoch read before the look-up ('0' without Redis); see TierRateLimiter.check. */
  epoch: string;
}

/**
 * How this instance tells the others that a key was revoked or a plan changed (KeyNotices;
 * wired in src/core.ts). Each method resolves once the others can no longer serve the old
 * state (see KeyNotices for what that means per setup); failures are reported, not thrown.
 */
export interface KeyInvalidation {
  revoked(keyId: string): Promise<void>;
  tierChanged(): Promise<void>;
}

/**
 * Self-service API keys: create (shown once), list, revoke, and resolve a presented key.
 *
 * Resolving a key costs a database query, so active keys are cached in memory on every
 * backend: by SHA-256 digest (never the key), least recently used out first, at most
 * `cacheMax` (KEY_CACHE_MAX), each for a jittered KEY_CACHE_TTL_MS..2×. Only active keys
 * found in the database are cached: unknown and revoked keys never are, so guessing cannot
 * fill it. Revocations and plan changes evict synchronously here and reach the other
 * instances through `invalidation` (PostgreSQL NOTIFY, and with Redis a marker checked on
 * every request: KeyNotices). The cache is used only while `trusted` (on PostgreSQL: while
 * this instance is subscribed to the notices; PGlite: always, one process owns the database).
 */
export class KeyService {
  readonly #cache: LRUCache<string, CachedKey>;
  /** Key id -> digest of the cached entry, so that a revocation evicts without a scan. */
  readonly #byId = new Map<string, string>();
  /** Bumped by every eviction, so a look-up that raced with one is not cached. */
  #generation = 0;
  #trusted: boolean;
  readonly #invalidation: KeyInvalidation | null;

  /**
   * @param opts.cacheMax KEY_CACHE_MAX; `trusted`: whether the cache may be used from the
   *   start (PGlite: true; PostgreSQL: false until KeyNotices has subscribed).
   */
  constructor(
    private readonly keys: KeyRepo,
    private readonly users: UserRepo,
    private readonly usage: UsageTracker,
    opts: { cacheMax?: number; trusted?: boolean; invalidation?: KeyInvalidation } = {},
  ) {
    this.#cache = new LRUCache<string, CachedKey>({
      max: opts.cacheMax ?? KEY_CACHE_MAX,
      // Keeps the key-id index in step with whatever leaves the cache (LRU, TTL, delete, clear).
      dispose: (e, hash) => {
        if (this.#byId.get(e.caller.keyId) === hash) this.#byId.delete(e.caller.keyId);
      },
    });
    this.#trusted = opts.trusted ?? true;
    this.#invalidation = opts.invalidation ?? null;
  }

  /** Drops the cached look-ups of one key, or all of them. */
  evict(keyId: string | 'all'): void {
    this.#generation++;
    if (keyId === 'all') {
      this.#cache.clear();
      return;
    }
    const hash = this.#byId.get(keyId);
    if (hash !== undefined) this.#cache.delete(hash);
  }

  /**
   * Whether the cache may be used: false empties it and sends every look-up to the database
   * (e.g. while the PostgreSQL notices are not received).
   */
  setTrusted(trusted: boolean): void {
    if (!trusted) this.evict('all');
    this.#trusted = trusted;
  }

  /** How many keys are cached (tests, metrics). */
  get cacheSize(): number {
    return this.#cache.size;
  }

  /**
   * The cached verification of a presented key, without any I/O: undefined when it is not
   * cached (then `authenticate`). A cached digest was an active, well-formed key when cached.
   */
  cached(key: string): CachedKey | undefined {
    return this.#trusted ? this.#cache.get(hashKey(key)) : undefined;
  }

  /**
   * Creates a key for the user (created on first sight).
   * @returns the full key, shown this once, with its id, prefix, name, tier and creation time.
   * @throws ServiceError KEY_LIMIT_REACHED when the user already has 5 active keys.
   */
  async create(user: UserIdentity, name: string | undefined): Promise<CreatedKey> {
    const u = await this.users.ensureUser(user.userId, user.email);
    const k = generateKey();
    let row: KeyRow | null;
    try {
      row = await this.keys.createKey(user.userId, name ?? 'default', k.prefix, k.hash, MAX_ACTIVE_KEYS);
    } catch (e) {
      // The caller gets an error and never sees this key, but the insert may have committed
      // (a timeout while the COMMIT's reply was on its way): it would take one of the user's
      // MAX_ACTIVE_KEYS slots, listed and unusable. Its row is deleted in the background.
      discardInBackground(() => this.keys.deleteByHash(k.hash));
      throw e;
    }
    if (!row) {
      throw new ServiceError(
        'KEY_LIMIT_REACHED',
        `You already have ${MAX_ACTIVE_KEYS} active API keys; revoke one first (POST /api/v1/keys/revoke with {"key_id": "<id from GET /api/v1/keys>"}, or on the dashboard's /account page)`,
        {
          max_active_keys: MAX_ACTIVE_KEYS,
        },
      );
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

  /**
   * One page of the user's keys with usage (this instance's unflushed counts included); never
   * the key. Active keys come first, then revoked ones, each newest first; `limit` per page,
   * after the position `cursor` names (the previous page's `next_cursor`; absent for the first
   * page); `next_cursor` is null on the last page. The page and whether another follows come
   * from one query (limit + 1 rows).
   * @throws ServiceError INVALID_PARAMETER (field `cursor`) for a cursor this service did not give.
   */
  async list(
    user: UserIdentity,
    opts: { limit: number; cursor?: string },
  ): Promise<{ keys: KeyView[]; limit: number; next_cursor: string | null }> {
    const { limit } = opts;
    const after = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor, true);
    const tier = (await this.users.userTier(user.userId)) ?? 'free';
    const today = new Date().toISOString().slice(0, 10);
    const rows = await this.keys.listKeys(user.userId, { limit: limit + 1, after: after as KeyPosition | undefined });
    const page = rows.slice(0, limit);
    return {
      keys: page.map((r) => this.#view(r, tier, today)),
      limit,
      next_cursor: rows.length > limit ? encodeCursor(page.at(-1)!) : null,
    };
  }

  /**
   * Revokes one of the user's keys; idempotent.
   * @throws ServiceError NOT_FOUND when the user has no key with this id (also another user's key).
   */
  async revoke(user: UserIdentity, keyId: string): Promise<RevokedKey> {
    const row = await this.keys.revokeKey(user.userId, keyId);
    if (!row) throw new ServiceError('NOT_FOUND', `Key '${keyId}' not found among your keys (GET /api/v1/keys lists them with their ids)`);
    this.evict(row.id);
    await this.#invalidation?.revoked(row.id);
    return { id: row.id, status: 'revoked', revoked_at: iso(row.revokedAt)! };
  }

  /**
   * Sets a user's plan (operator command); every key of the user reports the new tier on its
   * next request, on every instance.
   * @returns the number of users changed (0 when no user has this email).
   */
  async setTier(email: string, tier: PlanTier): Promise<number> {
    const n = await this.users.setTierByEmail(email, tier);
    this.evict('all');
    await this.#invalidation?.tierChanged();
    return n;
  }

  /**
   * Resolves a presented API key in the database and caches it when active. Format and
   * checksum are checked before any look-up. `epoch` is the tier epoch read before the call
   * (TierRateLimiter.check), stored with the cached key.
   * @throws ServiceError UNAUTHORIZED (details.reason: malformed | bad_checksum | unknown | revoked).
   */
  async authenticate(key: string, epoch = '0'): Promise<KeyCaller> {
    const bad = keyFormatError(key);
    if (bad)
      throw new ServiceError('UNAUTHORIZED', bad === 'malformed' ? 'Malformed API key' : 'Invalid API key (checksum mismatch)', {
        reason: bad,
      });
    const hash = hashKey(key);
    const generation = this.#generation;
    const found = await this.keys.findKey(hash);
    if (!found) throw new ServiceError('UNAUTHORIZED', 'Invalid API key', { reason: 'unknown' });
    if (found.status !== 'active') throw new ServiceError('UNAUTHORIZED', 'This API key has been revoked', { reason: 'revoked' });
    const caller: KeyCaller = { keyId: found.keyId, userId: found.userId, tier: found.tier };
    if (this.#trusted && generation === this.#generation) {
      this.#cache.set(hash, { caller, epoch }, { ttl: KEY_CACHE_TTL_MS + Math.floor(Math.random() * KEY_CACHE_TTL_MS) });
      this.#byId.set(caller.keyId, hash);
    }
    return caller;
  }
}

/**
 * The NOTIFY channel of key-cache invalidations. Payloads: `k:<keyId>:<nonce>` (a revoked
 * key), `tier:<nonce>` (a plan change: evict all), `ack:<nonce>:<instance>` (an instance has
 * evicted for notice `nonce`).
 */
export const KEY_CACHE_CHANNEL = 'key_cache';
/** Longest wait of a revocation or plan change for every instance's acknowledgement, ms. */
const NOTICE_ACK_TIMEOUT_MS = 2000;

/**
 * Key-cache invalidation across instances (KeyInvalidation), on two paths:
 * - With Redis: a revocation writes a marker for the key id (TierRateLimiter.markRevoked) and
 *   a plan change moves the tier epoch (bumpTierEpoch) before the operation answers; every
 *   request with a cached key checks both in the same script as its quota (Access.meter), so
 *   the next request on any instance is refused (or its tier re-read) whatever its cache
 *   holds. While Redis is unreachable the limiter counts in memory and skips that check: the
 *   notices below then stand alone.
 * - With PostgreSQL: NOTIFY on KEY_CACHE_CHANNEL; every subscribed instance evicts, then
 *   acknowledges. The operation answers once as many instances have acknowledged as hold
 *   the presence lock (Coordination.presence: every instance subscribed now), so the next
 *   request anywhere finds the key evicted. Bounded by NOTICE_ACK_TIMEOUT_MS: an instance
 *   that does not acknowledge in time (stalled, or its connection lost without PostgreSQL
 *   noticing yet) is reported and not waited for; until its next notice it may serve from
 *   its cache. An instance that knows it lost its notice connection stops using its cache
 *   (every request is then looked up) until it has subscribed again.
 * On PGlite one process owns the database: the synchronous eviction is the whole story.
 */
export class KeyNotices implements KeyInvalidation {
  readonly #instance = randomUUID();
  /** Notices of this instance awaiting acknowledgements: nonce -> instances that acknowledged, and a wake-up. */
  readonly #pending = new Map<string, { acks: Set<string>; wake: () => void }>();
  #subscribed = false;

  constructor(
    private readonly coordination: Coordination,
    private readonly limiter: TierRateLimiter,
    private readonly onError: (err: unknown, what: string) => void = () => {},
    /** Called when the subscription is lost (false) and when it stands again (true); for logs. */
    private readonly onSubscription: (subscribed: boolean) => void = () => {},
  ) {}

  /**
   * Subscribes `keys` to the notices: it evicts on each (and acknowledges it), and trusts its
   * cache only while the subscription stands.
   * @throws when the first subscription fails (the cache then stays untrusted; retried in the background).
   */
  async subscribe(keys: KeyService): Promise<void> {
    await this.coordination.listen(
      KEY_CACHE_CHANNEL,
      (payload) => {
        const [kind, a, b] = payload.split(':');
        if (kind === 'ack') {
          const p = a ? this.#pending.get(a) : undefined;
          if (p && b) {
            p.acks.add(b);
            p.wake();
          }
          return;
        }
        if (kind === 'k' && a) keys.evict(a);
        else keys.evict('all');
        const nonce = kind === 'k' ? b : a;
        if (nonce)
          this.coordination
            .notify(KEY_CACHE_CHANNEL, `ack:${nonce}:${this.#instance}`)
            .catch((e: unknown) => this.onError(e, 'key-cache acknowledgement (PostgreSQL)'));
      },
      (subscribed) => {
        const changed = subscribed !== this.#subscribed;
        this.#subscribed = subscribed;
        keys.setTrusted(subscribed);
        if (changed) this.onSubscription(subscribed);
      },
    );
  }

  async revoked(keyId: string): Promise<void> {
    await this.limiter.markRevoked(keyId).catch((e: unknown) => this.onError(e, 'revocation marker (Redis)'));
    await this.#send((nonce) => `k:${keyId}:${nonce}`);
  }

  async tierChanged(): Promise<void> {
    await this.limiter.bumpTierEpoch().catch((e: unknown) => this.onError(e, 'tier epoch (Redis)'));
    await this.#send((nonce) => `tier:${nonce}`);
  }

  /** NOTIFYs, then (when subscribed) waits, bounded, until every present instance has acknowledged. */
  async #send(payload: (nonce: string) => string): Promise<void> {
    const nonce = randomUUID();
    const entry = { acks: new Set<string>(), wake: () => {} };
    if (this.#subscribed) this.#pending.set(nonce, entry);
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.coordination.notify(KEY_CACHE_CHANNEL, payload(nonce));
      if (!this.#subscribed) return;
      const present = await this.coordination.presence();
      const all = await new Promise<boolean>((resolve) => {
        entry.wake = () => {
          if (entry.acks.size >= present) resolve(true);
        };
        timer = setTimeout(() => resolve(false), NOTICE_ACK_TIMEOUT_MS);
        entry.wake();
      });
      if (!all)
        this.onError(
          new Error(`${entry.acks.size} of ${present} instances acknowledged within ${NOTICE_ACK_TIMEOUT_MS} ms`),
          'key-cache notice (PostgreSQL)',
        );
    } catch (e) {
      this.onError(e, 'key-cache notice (PostgreSQL)');
    } finally {
      clearTimeout(timer);
      this.#pending.delete(nonce);
    }
  }
}
