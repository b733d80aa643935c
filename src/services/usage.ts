import type { UsageDelta } from '../store/key-repo.ts';

/** Where flushed usage goes (KeyRepo in the service). */
export interface UsageSink {
  /** Adds the counted usage to the keys; a rejection leaves the counts pending for the next flush. */
  addUsage(deltas: UsageDelta[]): Promise<void>;
}

/** A key's requests on one UTC day, not written yet (last use in epoch ms). */
interface Pending {
  keyId: string;
  requests: number;
  lastUsedMs: number;
  day: string;
}

/**
 * Per-key usage counted in memory and written in batches, so a request costs no database
 * write. Flushed every `intervalMs` and on `stop()` (clean shutdown loses nothing); a failed
 * flush keeps the counts for the next one.
 */
export class UsageTracker {
  #pending = new Map<string, Pending>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly repo: UsageSink,
    private readonly intervalMs = 5000,
    private readonly onError: (e: unknown) => void = () => {},
  ) {}

  /** Starts the periodic flush. */
  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), this.intervalMs);
    this.#timer.unref();
  }

  /** The UTC day of the last `record`, and the epoch ms range it covers (avoids formatting a date per request). */
  #day = { name: '', from: 0, to: 0 };

  /** Counts one request of `keyId` at `now` (epoch ms or Date). */
  record(keyId: string, now: number | Date = Date.now()): void {
    const ms = typeof now === 'number' ? now : now.getTime();
    if (ms < this.#day.from || ms >= this.#day.to) {
      const from = ms - (ms % 86_400_000);
      this.#day = { name: new Date(from).toISOString().slice(0, 10), from, to: from + 86_400_000 };
    }
    const day = this.#day.name;
    const k = `${keyId}|${day}`;
    const d = this.#pending.get(k);
    if (d) {
      d.requests += 1;
      d.lastUsedMs = Math.max(d.lastUsedMs, ms);
    } else this.#pending.set(k, { keyId, requests: 1, lastUsedMs: ms, day });
  }

  /** Requests of `keyId` on `day` counted here and not flushed yet. */
  pending(keyId: string, day: string): { requests: number; lastUsedAt: string | null } {
    const d = this.#pending.get(`${keyId}|${day}`);
    return { requests: d?.requests ?? 0, lastUsedAt: d ? new Date(d.lastUsedMs).toISOString() : null };
  }

  /** Writes the pending counts; concurrent calls are serialized. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      if (this.#pending.size === 0) return;
      const batch = [...this.#pending.values()];
      this.#pending = new Map();
      try {
        await this.repo.addUsage(
          batch.map((d): UsageDelta => ({
            keyId: d.keyId,
            requests: d.requests,
            day: d.day,
            lastUsedAt: new Date(d.lastUsedMs).toISOString(),
          })),
        );
      } catch (e) {
        // Put the counts back so nothing is lost; they go out with the next flush.
        for (const d of batch) {
          const k = `${d.keyId}|${d.day}`;
          const cur = this.#pending.get(k);
          if (cur) {
            cur.requests += d.requests;
            cur.lastUsedMs = Math.max(cur.lastUsedMs, d.lastUsedMs);
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
