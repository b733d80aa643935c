import type { AccountRepo, UsageDelta } from '../store/account-repo.ts';

/**
 * Per-key usage counted in memory and written in batches, so a request costs no database
 * write. Flushed every `intervalMs` and on `stop()` (clean shutdown loses nothing); a failed
 * flush keeps the counts for the next one.
 */
export class UsageTracker {
  #pending = new Map<string, UsageDelta>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  constructor(private readonly repo: AccountRepo, private readonly intervalMs = 5000, private readonly onError: (e: unknown) => void = () => {}) {}

  /** Starts the periodic flush. */
  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), this.intervalMs);
    this.#timer.unref();
  }

  /** Counts one request of `keyId` at `now`. */
  record(keyId: string, now = new Date()): void {
    const day = now.toISOString().slice(0, 10);
    const k = `${keyId}|${day}`;
    const d = this.#pending.get(k);
    if (d) {
      d.requests += 1;
      d.lastUsedAt = now.toISOString();
    } else this.#pending.set(k, { keyId, requests: 1, lastUsedAt: now.toISOString(), day });
  }

  /** Requests of `keyId` on `day` counted here and not flushed yet. */
  pending(keyId: string, day: string): { requests: number; lastUsedAt: string | null } {
    const d = this.#pending.get(`${keyId}|${day}`);
    return { requests: d?.requests ?? 0, lastUsedAt: d?.lastUsedAt ?? null };
  }

  /** Writes the pending counts; concurrent calls are serialized. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      if (this.#pending.size === 0) return;
      const batch = [...this.#pending.values()];
      this.#pending = new Map();
      try {
        await this.repo.addUsage(batch);
      } catch (e) {
        // Put the counts back so nothing is lost; they go out with the next flush.
        for (const d of batch) {
          const k = `${d.keyId}|${d.day}`;
          const cur = this.#pending.get(k);
          if (cur) {
            cur.requests += d.requests;
            if (d.lastUsedAt > cur.lastUsedAt) cur.lastUsedAt = d.lastUsedAt;
          } else this.#pending.set(k, d);
        }
        this.onError(e);
      }
    });
    return this.#flushing;
  }

  /** Stops the timer and flushes what is pending. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }
}
