import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import { UsageTracker } from '../../src/services/usage.ts';
import { openDatabase, type Database } from '../../src/store/db.ts';
import { KeyRepo, type UsageDelta } from '../../src/store/key-repo.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable } from '../helpers/env.ts';

// The usage flush (issue 13 item 4) on a real KeyRepo: 10,000 pending keys are written in
// statements of at most N keys, the event loop gets turns between them, every count arrives,
// a failed chunk is kept, stop() writes everything, concurrent flushes are serialized.
// Structural checks only (statement sizes, setImmediate turns), no timing.

const KEYS = 10_000;
const CHUNK = 500;
const DAY = '2026-03-01';
const T0 = Date.parse(`${DAY}T12:00:00Z`);

/** A KeyRepo that records the size of every addUsage call and can fail chosen calls (the writes are the real ones). */
class CountingRepo {
  calls: number[] = [];
  /** performance.now() at the start and the end of every call, ms. */
  spans: { start: number; end: number }[] = [];
  failOn = new Set<number>();
  inFlight = 0;
  maxInFlight = 0;
  constructor(private readonly inner: KeyRepo) {}
  async addUsage(deltas: UsageDelta[]): Promise<void> {
    const n = this.calls.push(deltas.length);
    const span = { start: performance.now(), end: 0 };
    this.spans.push(span);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.failOn.has(n)) throw new Error(`chunk ${n} refused`);
      await this.inner.addUsage(deltas);
    } finally {
      this.inFlight -= 1;
      span.end = performance.now();
    }
  }
}

/** Creates KEYS keys for one user (on the job connections: no request statement timeout); returns their ids. */
async function seedKeys(db: Database): Promise<string[]> {
  await db.jobs.execute(sql`insert into app_users (id) values ('usage-user')`);
  const rows = await db.jobs.execute(sql`
    insert into api_keys (user_id, name, prefix, key_hash)
    select 'usage-user', 'k' || g, 'svc_live_', md5(g::text) from generate_series(1, ${KEYS}) as g
    returning id`);
  return (rows as unknown as { rows: { id: string }[] }).rows.map((r) => r.id);
}

async function totals(db: Database): Promise<{ keys: number; sum: number; today: number; last: string | null }> {
  const res = await db.jobs.execute(sql`
    select count(*) filter (where requests_total > 0)::int as keys, coalesce(sum(requests_total), 0)::int as sum,
           coalesce(sum(requests_day) filter (where usage_day = ${DAY}::date), 0)::int as today,
           max(last_used_at)::text as last
    from api_keys`);
  return (res as unknown as { rows: { keys: number; sum: number; today: number; last: string | null }[] }).rows[0]!;
}

/** Counts the turns the event loop gives to setImmediate callbacks while `work` runs. */
async function immediateTurns(work: Promise<void>): Promise<number> {
  let turns = 0;
  let done = false;
  const spin = (): void => {
    if (done) return;
    turns += 1;
    setImmediate(spin);
  };
  setImmediate(spin);
  await work;
  done = true;
  return turns;
}

for (const backend of ['pglite', 'postgres'] as const) {
  describe(`usage flush on ${backend}`, () => {
    let database: Database;
    let ids: string[];
    let drop: (() => Promise<void>) | undefined;

    const open = async (t: { skip(msg: string): void }): Promise<boolean> => {
      if (backend === 'postgres') {
        if (!(await postgresAvailable())) {
          console.log(PG_SKIP);
          t.skip(PG_SKIP);
          return false;
        }
        const tmp = await createTempPgDatabase();
        drop = tmp.drop;
        database = await openDatabase({ databaseUrl: tmp.url, pgliteDir: 'memory://' });
      } else database = await openDatabase({ pgliteDir: 'memory://' });
      ids = await seedKeys(database);
      return true;
    };
    const close = async (): Promise<void> => {
      await database?.close();
      await drop?.();
    };

    test(`${KEYS} pending keys: statements of at most ${CHUNK} keys, event-loop turns between them, every count arrives, a failed chunk is kept`, async (t) => {
      if (!(await open(t))) return;
      try {
        const repo = new CountingRepo(new KeyRepo(database.db, database.kind));
        const errors: unknown[] = [];
        const usage = new UsageTracker(repo, 60_000, (e) => errors.push(e), CHUNK);
        for (const [i, id] of ids.entries()) {
          usage.record(id, T0 + i);
          if (i % 2 === 0) usage.record(id, T0 + i);
        }
        const expectedSum = KEYS + KEYS / 2;
        assert.equal(usage.size, KEYS);

        // The third chunk fails: it and every later chunk stay pending, nothing is lost.
        repo.failOn.add(3);
        const turns1 = await immediateTurns(usage.flush());
        assert.deepEqual(repo.calls, [CHUNK, CHUNK, CHUNK]);
        assert.equal(errors.length, 1);
        assert.equal((await totals(database)).keys, 2 * CHUNK, 'the two written chunks are in');
        assert.equal(usage.size, KEYS - 2 * CHUNK, 'the failed chunk and the rest are pending again');
        assert.ok(turns1 >= 2, `event loop turns between chunks: ${turns1}`);
        // A count made meanwhile on a key of the failed chunk is merged with it.
        const failedKey = ids[2 * CHUNK]!;
        usage.record(failedKey, T0 + KEYS);
        assert.equal(usage.pending(failedKey, DAY).requests, 2 + 1);

        repo.calls = [];
        repo.failOn.clear();
        const turns2 = await immediateTurns(usage.flush());
        const chunks = Math.ceil((KEYS - 2 * CHUNK) / CHUNK);
        assert.equal(repo.calls.length, chunks);
        assert.ok(
          repo.calls.every((n) => n <= CHUNK),
          `statement sizes ${repo.calls.join(',')}`,
        );
        // The event loop ran setImmediate callbacks between every two statements.
        assert.ok(turns2 >= chunks - 1, `event loop turns: ${turns2} for ${chunks} statements`);
        assert.equal(usage.size, 0);
        assert.equal(errors.length, 1);
        const after = await totals(database);
        assert.deepEqual(
          { keys: after.keys, sum: after.sum, today: after.today },
          { keys: KEYS, sum: expectedSum + 1, today: expectedSum + 1 },
        );
        assert.equal(new Date(after.last!).getTime(), T0 + KEYS);
      } finally {
        await close();
      }
    });

    test('counts being written stay visible to pending(); concurrent flushes are serialized; stop() writes everything', async (t) => {
      if (!(await open(t))) return;
      try {
        const repo = new CountingRepo(new KeyRepo(database.db, database.kind));
        const usage = new UsageTracker(repo, 60_000, () => {}, CHUNK);
        for (const [i, id] of ids.entries()) usage.record(id, T0 + i);
        const last = ids.at(-1)!;
        const flushing = usage.flush();
        // The last chunk is written last: its count is in flight, neither lost nor doubled.
        assert.equal(usage.pending(last, DAY).requests, 1);
        const second = usage.flush();
        for (const [i, id] of ids.entries()) usage.record(id, T0 + KEYS + i);
        assert.equal(usage.pending(last, DAY).requests, 2, 'in flight + counted meanwhile');
        await flushing;
        await usage.stop();
        await second;
        assert.equal(repo.maxInFlight, 1, 'one statement at a time');
        assert.ok(
          repo.calls.every((n) => n <= CHUNK),
          `statement sizes ${repo.calls.join(',')}`,
        );
        assert.equal(usage.size, 0);
        const after = await totals(database);
        assert.deepEqual({ keys: after.keys, sum: after.sum }, { keys: KEYS, sum: 2 * KEYS });
        assert.equal(usage.pending(last, DAY).requests, 0);
      } finally {
        await close();
      }
    });

    test('a new UTC day before a flush: both days are kept apart and written, the newest day last', async (t) => {
      if (!(await open(t))) return;
      try {
        const usage = new UsageTracker(new KeyRepo(database.db, database.kind), 60_000, () => {}, CHUNK);
        const [a, b] = [ids[0]!, ids[1]!];
        const next = T0 + 86_400_000;
        const NEXT_DAY = new Date(next).toISOString().slice(0, 10);
        usage.record(a, T0);
        usage.record(a, T0 + 1);
        usage.record(b, T0);
        for (let i = 0; i < 3; i++) usage.record(a, next + i);
        usage.record(a, T0 + 2); // a late request of the day before (a clock step back)
        assert.deepEqual(usage.pending(a, DAY), { requests: 3, lastUsedAt: new Date(T0 + 2).toISOString() });
        assert.deepEqual(usage.pending(a, NEXT_DAY), { requests: 3, lastUsedAt: new Date(next + 2).toISOString() });
        assert.equal(usage.pending(b, DAY).requests, 1);
        assert.equal(usage.size, 3, '(a, day), (a, next day), (b, day)');
        await usage.flush();
        assert.equal(usage.size, 0);
        assert.equal(usage.pending(a, NEXT_DAY).requests, 0);
        const res = await database.jobs.execute(sql`
          select id::text, requests_total::int as total, requests_day::int as today, usage_day::text as day
          from api_keys where id in (${a}::uuid, ${b}::uuid)`);
        const rows = new Map(
          (res as unknown as { rows: { id: string; total: number; today: number; day: string }[] }).rows.map((r) => [r.id, r]),
        );
        assert.deepEqual({ ...rows.get(a)!, id: 'a' }, { id: 'a', total: 6, today: 3, day: NEXT_DAY });
        assert.deepEqual({ ...rows.get(b)!, id: 'b' }, { id: 'b', total: 1, today: 1, day: DAY });
        // An idle interval writes nothing; a new request counts from 1.
        await usage.flush();
        usage.record(a, next + 10);
        assert.equal(usage.pending(a, NEXT_DAY).requests, 1);
      } finally {
        await close();
      }
    });

    test('the periodic flush is paced to its share of the main thread; an explicit flush is not', async (t) => {
      if (!(await open(t))) return;
      try {
        const paceKeys = 2_000;
        const chunk = 250;
        /** A tracker at `share` over a counting repo, with one request of each of paceKeys keys counted. */
        const tracker = (share: number): { repo: CountingRepo; usage: UsageTracker } => {
          const repo = new CountingRepo(new KeyRepo(database.db, database.kind));
          const usage = new UsageTracker(repo, 60_000, () => {}, chunk, share);
          for (const [i, id] of ids.slice(0, paceKeys).entries()) usage.record(id, T0 + i);
          return { repo, usage };
        };
        // share 0.25: after a statement of d ms the next starts at least 3d ms later.
        const { repo, usage } = tracker(0.25);
        await usage.flush({ paced: true });
        assert.equal(repo.calls.length, paceKeys / chunk);
        for (let i = 1; i < repo.spans.length; i++) {
          const d = repo.spans[i - 1]!.end - repo.spans[i - 1]!.start;
          const gap = repo.spans[i]!.start - repo.spans[i - 1]!.end;
          // Timers may fire up to a millisecond early.
          assert.ok(gap >= 3 * d - 1.5, `statement ${i}: ${d.toFixed(2)} ms, then a pause of ${gap.toFixed(2)} ms`);
        }
        assert.equal((await totals(database)).keys, paceKeys);

        // Unpaced (what stop() and a direct call do), even with a share that would pause 999x
        // each statement: the statements follow each other after one event-loop turn.
        const { repo: fast, usage: usage2 } = tracker(0.001);
        await usage2.stop();
        assert.equal(fast.calls.length, paceKeys / chunk);
        const busy = fast.spans.reduce((a, s) => a + (s.end - s.start), 0);
        const wall = fast.spans.at(-1)!.end - fast.spans[0]!.start;
        assert.ok(wall < 100 * busy, `unpaced: ${wall.toFixed(1)} ms in all for ${busy.toFixed(1)} ms of statements`);
        assert.equal((await totals(database)).sum, 2 * paceKeys);

        // stop() during a paced flush whose pauses would last ~10,000x its statements: the
        // running flush writes the rest without pausing, and every count arrives.
        const { repo: slow, usage: usage3 } = tracker(0.0001);
        const running = usage3.flush({ paced: true });
        while (slow.spans.length === 0 || slow.spans[0]!.end === 0) await new Promise((r) => setImmediate(r));
        const firstMs = slow.spans[0]!.end - slow.spans[0]!.start;
        await usage3.stop();
        await running;
        assert.equal(slow.calls.length, paceKeys / chunk);
        const stopWall = slow.spans.at(-1)!.end - slow.spans[0]!.end;
        assert.ok(
          stopWall < 100 * firstMs,
          `after stop(): ${stopWall.toFixed(1)} ms for the rest (the pause alone would be ~${(9999 * firstMs).toFixed(0)} ms)`,
        );
        assert.equal(usage3.size, 0);
        assert.equal((await totals(database)).sum, 3 * paceKeys);
      } finally {
        await close();
      }
    });
  });
}

test('an onError that throws neither rejects the flush nor stops later flushes', async () => {
  const written: UsageDelta[][] = [];
  let fail = true;
  const sink = {
    addUsage: async (deltas: UsageDelta[]): Promise<void> => {
      if (fail) throw new Error('database unavailable');
      written.push(deltas);
    },
  };
  let reported = 0;
  const usage = new UsageTracker(sink, 60_000, () => {
    reported += 1;
    throw new Error('the error handler itself failed');
  });
  usage.record('key-a', T0);
  await usage.flush(); // resolves: the handler's own error is swallowed
  assert.equal(reported, 1);
  assert.equal(usage.pending('key-a', DAY).requests, 1, 'the failed count is pending again');
  fail = false;
  usage.record('key-a', T0 + 1);
  await usage.flush();
  assert.deepEqual(
    written.flat().map((d) => [d.keyId, d.requests]),
    [['key-a', 2]],
    'the next flush writes the kept count and the new one',
  );
  assert.equal(usage.size, 0);
  await usage.stop();
});

test('a chunk size below 1 or a share outside (0, 1] is refused', () => {
  assert.throws(() => new UsageTracker({ addUsage: async () => {} }, 1000, () => {}, 250, 0), RangeError);
  assert.throws(() => new UsageTracker({ addUsage: async () => {} }, 1000, () => {}, 250, 1.5), RangeError);
  assert.throws(() => new UsageTracker({ addUsage: async () => {} }, 1000, () => {}, 0), RangeError);
});
