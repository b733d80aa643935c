// A section of `npm run bench` (issue 13 item 4), also runnable alone:
//   node --import tsx bench/usage-flush.ts [keys] [rounds]
// The usage flush of `keys` (default 10,000) active keys on PGlite (WASM PostgreSQL on the
// main thread), through the real UsageTracker and KeyRepo: the longest the event loop was
// held during one flush (perf_hooks monitorEventLoopDelay, 1 ms resolution, and the largest
// gap between two setImmediate turns, in wall time and in process CPU time), for one statement over every key (what the flush did
// before: chunk = keys) and for the default chunks (USAGE_FLUSH_CHUNK, 50), interleaved
// over `rounds` rounds (default 3) in one process; medians reported, with their ratio.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import { DEFAULT_USAGE_FLUSH_CHUNK, UsageTracker } from '../src/services/usage.ts';
import { openDatabase } from '../src/store/db.ts';
import { KeyRepo } from '../src/store/key-repo.ts';

/** One flush's measurements, ms. */
export interface FlushSample {
  /** Keys per statement. */
  chunk: number;
  /** Wall time of the whole flush. */
  totalMs: number;
  /** Largest event-loop delay seen by monitorEventLoopDelay during the flush. */
  maxDelayMs: number;
  /** Largest gap between two consecutive setImmediate turns during the flush (wall time: includes time the OS gave to other processes). */
  maxGapMs: number;
  /** Largest process CPU time spent between two consecutive setImmediate turns (the work done without yielding; less sensitive to a loaded machine). */
  maxGapCpuMs: number;
  /** Median wall-time gap over the gaps longer than 0.5 ms (the typical stall a request meets during the flush). */
  medianStallMs: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/**
 * Measures the flush of `keys` keys (one request counted per key) with one statement over
 * every key and with chunks of `chunk` keys, alternately, `rounds` times each, on one
 * in-memory PGlite database. Prints one line and returns the samples.
 */
export async function benchUsageFlush(opts: { keys?: number; rounds?: number; chunk?: number } = {}): Promise<{
  single: FlushSample[];
  chunked: FlushSample[];
}> {
  const keys = opts.keys ?? 10_000;
  const rounds = opts.rounds ?? 3;
  const chunk = opts.chunk ?? DEFAULT_USAGE_FLUSH_CHUNK;
  const database = await openDatabase({ pgliteDir: 'memory://' });
  try {
    await database.jobs.execute(sql`insert into app_users (id) values ('bench-usage')`);
    const res = await database.jobs.execute(sql`
      insert into api_keys (user_id, name, prefix, key_hash)
      select 'bench-usage', 'k' || g, 'svc_live_', md5(g::text) from generate_series(1, ${keys}) as g returning id`);
    const ids = (res as unknown as { rows: { id: string }[] }).rows.map((r) => r.id);
    const repo = new KeyRepo(database.db, database.kind);

    const once = async (size: number): Promise<FlushSample> => {
      const usage = new UsageTracker(
        repo,
        60_000,
        (e) => {
          throw e;
        },
        size,
      );
      const now = Date.now();
      for (const id of ids) usage.record(id, now);
      const h = monitorEventLoopDelay({ resolution: 1 });
      let last = performance.now();
      let lastCpu = process.cpuUsage();
      let maxGap = 0;
      let maxGapCpu = 0;
      const stalls: number[] = [];
      let done = false;
      const spin = (): void => {
        const t = performance.now();
        const c = process.cpuUsage(lastCpu);
        maxGap = Math.max(maxGap, t - last);
        if (t - last > 0.5) stalls.push(t - last);
        maxGapCpu = Math.max(maxGapCpu, (c.user + c.system) / 1000);
        last = t;
        lastCpu = process.cpuUsage();
        if (!done) setImmediate(spin);
      };
      h.enable();
      setImmediate(spin);
      const t0 = performance.now();
      await usage.flush();
      const end = performance.now();
      const totalMs = end - t0;
      // The stretch from the last turn to the end of the flush counts too (a flush that never
      // yields is one stall); a timer after it lets the histogram record a late tick.
      spin();
      done = true;
      await new Promise((r) => setTimeout(r, 2));
      h.disable();
      if (usage.size !== 0) throw new Error('usage flush bench: counts left pending');
      return {
        chunk: size,
        totalMs,
        maxDelayMs: h.max / 1e6,
        maxGapMs: maxGap,
        maxGapCpuMs: maxGapCpu,
        medianStallMs: stalls.length ? median(stalls) : 0,
      };
    };

    await once(chunk); // warm-up (JIT, PGlite caches)
    const single: FlushSample[] = [];
    const chunked: FlushSample[] = [];
    for (let r = 0; r < rounds; r++) {
      if (r % 2 === 0) {
        single.push(await once(keys));
        chunked.push(await once(chunk));
      } else {
        chunked.push(await once(chunk));
        single.push(await once(keys));
      }
    }
    const f = (xs: FlushSample[], k: keyof FlushSample) => median(xs.map((x) => x[k])).toFixed(0);
    const ratio = median(chunked.map((x) => x.maxGapCpuMs)) / median(single.map((x) => x.maxGapCpuMs));
    console.log(
      `usage flush of ${keys} keys on PGlite (median of ${rounds}): one statement: longest event-loop stall ${f(single, 'maxGapCpuMs')} ms CPU / ` +
        `${f(single, 'maxGapMs')} ms wall, flush ${f(single, 'totalMs')} ms; chunks of ${chunk}: longest stall ${f(chunked, 'maxGapCpuMs')} ms CPU / ` +
        `${f(chunked, 'maxGapMs')} ms wall (monitorEventLoopDelay max ${f(chunked, 'maxDelayMs')} ms), median stall ${median(chunked.map((x) => x.medianStallMs)).toFixed(1)} ms, flush ${f(chunked, 'totalMs')} ms; ` +
        `stall ratio chunked/one statement (CPU) ${ratio.toFixed(2)}`,
    );
    return { single, chunked };
  } finally {
    await database.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [keys, rounds] = process.argv.slice(2).map(Number);
  const out = await benchUsageFlush({ keys: keys || undefined, rounds: rounds || undefined });
  console.log(JSON.stringify(out));
}
