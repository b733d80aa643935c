import { setTimeout as sleep } from 'node:timers/promises';
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
 * Keys written per statement by default (USAGE_FLUSH_CHUNK). On PGlite with 10,000 keys
 * (bench/usage-flush.ts, medians of 3, twice each; docs/benchmarks.md "Thirteenth session"):
 * chunks of 250 hold the main thread 3.3-4.6 ms each (median) and the flush takes 147-225 ms;
 * chunks of 100 2.7-3.1 ms and 282-313 ms; chunks of 50 1.4-1.5 ms and 326-336 ms. A request
 * waits out at most one statement, so the shortest statements keep the p99 down; the flush's
 * larger total is spread by the pacing (DEFAULT_USAGE_FLUSH_SHARE).
 */
export const DEFAULT_USAGE_FLUSH_CHUNK = 50;

/**
 * Most of the wall time a periodic flush spends in its statements by default (USAGE_FLUSH_SHARE).
 * At 10,000 keys on PGlite the flush costs ~150-340 ms of main thread every USAGE_FLUSH_MS;
 * written back to back, the requests served meanwhile queue behind statement after statement
 * and the 10,000-key p99 was 2-3x the small pool's (docs/benchmarks.md, "Thirteenth
 * session"). Paced to a fifth, the same work is spread over ~5x as long (~1.7 s of each 5 s
 * at 10,000 keys); above ~30,000 keys a flush outlasts the interval and the skipped ticks
 * make the interval longer instead of the share larger.
 */
export const DEFAULT_USAGE_FLUSH_SHARE = 0.2;

/** The map key of a key's usage on one day. */
const slot = (keyId: string, day: string): string => `${keyId}|${day}`;

/**
 * Per-key usage counted in memory and written in batches, so a request costs no database
 * write. Flushed every `intervalMs` and on `stop()` (clean shutdown loses nothing).
 *
 * A flush never holds the event loop for long: the counts pending when it starts are written
 * in statements of at most `chunkSize` keys, and the flush yields to the event loop
 * (setImmediate) between two statements, so requests are served in between (on PGlite, whose
 * queries run on the main thread, one statement over 10,000 keys blocked it ~290 ms). The
 * periodic flush is also paced: a pause after each statement in proportion to its latency, so
 * that its statements take at most `busyShare` of the time and do not follow each other
 * densely enough to queue requests behind them. A chunk
 * that fails goes back to the pending counts with every chunk not written yet (merged with
 * what was counted meanwhile) and the flush ends there: the next flush retries them.
 * Concurrent flushes are serialized. Counts being written stay visible to `pending()` until
 * their statement commits.
 */
export class UsageTracker {
  #pending = new Map<string, Pending>();
  /** Counts taken by the running flush and not committed yet. */
  #inflight = new Map<string, Pending>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  /**
   * @param repo where the counts go (KeyRepo).
   * @param intervalMs how often `start()` flushes, ms (USAGE_FLUSH_MS).
   * @param onError called with the error of a failed chunk (its counts are kept for the next flush).
   * @param chunkSize most keys per statement (USAGE_FLUSH_CHUNK, >= 1).
   * @param busyShare most of the wall time a periodic flush may spend in its statements, in
   *   (0, 1] (USAGE_FLUSH_SHARE): after a statement that took t ms (its latency: main-thread
   *   time on PGlite, mostly the round trip on PostgreSQL) the flush waits t × (1 − share) /
   *   share ms, at most `intervalMs`, before the next. 1 writes the chunks back to back (one
   *   event-loop turn between).
   */
  constructor(
    private readonly repo: UsageSink,
    private readonly intervalMs = 5000,
    private readonly onError: (e: unknown) => void = () => {},
    private readonly chunkSize = DEFAULT_USAGE_FLUSH_CHUNK,
    private readonly busyShare = DEFAULT_USAGE_FLUSH_SHARE,
  ) {
    if (!Number.isInteger(chunkSize) || chunkSize < 1)
      throw new RangeError(`usage flush chunk size must be an integer >= 1, got ${chunkSize}`);
    if (!(busyShare > 0 && busyShare <= 1)) throw new RangeError(`usage flush share must be in (0, 1], got ${busyShare}`);
  }

  /** True while a flush runs. */
  #running = false;
  /** Aborted by `stop()`: a paced flush's pause ends, and the rest is written without pausing. */
  #hurry = new AbortController();

  /** Starts the periodic flush (paced: see `busyShare`); a tick that finds a flush still running is skipped. */
  start(): void {
    if (this.#hurry.signal.aborted) this.#hurry = new AbortController();
    this.#timer ??= setInterval(() => {
      if (!this.#running) void this.flush({ paced: true });
    }, this.intervalMs);
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
    const k = slot(keyId, day);
    const d = this.#pending.get(k);
    if (d) {
      d.requests += 1;
      d.lastUsedMs = Math.max(d.lastUsedMs, ms);
    } else this.#pending.set(k, { keyId, requests: 1, lastUsedMs: ms, day });
  }

  /** Requests of `keyId` on `day` counted here and not written yet (including those a running flush has not committed). */
  pending(keyId: string, day: string): { requests: number; lastUsedAt: string | null } {
    const k = slot(keyId, day);
    const a = this.#pending.get(k);
    const b = this.#inflight.get(k);
    if (!a && !b) return { requests: 0, lastUsedAt: null };
    const last = Math.max(a?.lastUsedMs ?? 0, b?.lastUsedMs ?? 0);
    return { requests: (a?.requests ?? 0) + (b?.requests ?? 0), lastUsedAt: new Date(last).toISOString() };
  }

  /** Keys with counts not written yet (pending or in a running flush). */
  get size(): number {
    return this.#pending.size + this.#inflight.size;
  }

  /**
   * Writes the counts pending now, in chunks of at most `chunkSize` keys with a turn of the
   * event loop between two; concurrent calls are serialized (each waits for the previous).
   * Never rejects: a failed chunk is reported to `onError` and kept for the next flush.
   * @param opts.paced pause after each statement so that the statements take at most
   *   `busyShare` of the wall time (the periodic flush; default false: back to back).
   */
  flush(opts: { paced?: boolean } = {}): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      this.#running = true;
      try {
        await this.#flushPending(opts.paced === true);
      } finally {
        this.#running = false;
      }
    });
    return this.#flushing;
  }

  async #flushPending(paced: boolean): Promise<void> {
    if (this.#pending.size === 0) return;
    // Older days first, so a key's usage_day ends on the newest day whatever the chunks.
    const batch = [...this.#pending.values()].sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : 0));
    this.#inflight = this.#pending;
    this.#pending = new Map();
    try {
      let pause = 0;
      for (let i = 0; i < batch.length; i += this.chunkSize) {
        if (i > 0) await this.#pause(pause);
        const chunk = batch.slice(i, i + this.chunkSize);
        const t0 = performance.now();
        try {
          await this.repo.addUsage(
            chunk.map((d): UsageDelta => ({
              keyId: d.keyId,
              requests: d.requests,
              day: d.day,
              lastUsedAt: new Date(d.lastUsedMs).toISOString(),
            })),
          );
        } catch (e) {
          // Put this chunk and the ones not written yet back, so nothing is lost; they go out with the next flush.
          this.#restore(batch.slice(i));
          this.#report(e);
          return;
        }
        for (const d of chunk) this.#inflight.delete(slot(d.keyId, d.day));
        if (paced) pause = Math.min(this.intervalMs, ((performance.now() - t0) * (1 - this.busyShare)) / this.busyShare);
      }
    } finally {
      this.#inflight = new Map();
    }
  }

  /** One event-loop turn (setImmediate), or `ms` (>= 1) ms that `stop()` cuts short. */
  async #pause(ms: number): Promise<void> {
    const { signal } = this.#hurry;
    if (ms < 1 || signal.aborted) return new Promise<void>((resolve) => setImmediate(resolve));
    await sleep(ms, undefined, { signal }).catch(() => {});
  }

  /**
   * Hands a failed chunk's error to `onError`. An `onError` that throws is swallowed: the flush
   * must still settle, or every later flush (serialized behind it) would be skipped and the
   * periodic one would end in an unhandled rejection.
   */
  #report(e: unknown): void {
    try {
      this.onError(e);
    } catch {
      // Nothing left to report it to; the chunk is pending again either way.
    }
  }

  /** Merges counts that could not be written into the pending ones. */
  #restore(rows: Pending[]): void {
    for (const d of rows) {
      const k = slot(d.keyId, d.day);
      const cur = this.#pending.get(k);
      if (cur) {
        cur.requests += d.requests;
        cur.lastUsedMs = Math.max(cur.lastUsedMs, d.lastUsedMs);
      } else this.#pending.set(k, d);
    }
  }

  /**
   * Stops the timer and flushes what is pending (every chunk, after any running flush). A
   * running paced flush stops pausing: shutdown waits for the statements only.
   */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#hurry.abort();
    await this.flush();
  }
}
