import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import pg from 'pg';
import { createCore, prepareCore, type Core } from '../../src/core.ts';
import { addDays } from '../../src/engine/util.ts';
import { ingestRound } from '../../src/jobs/ingest.ts';
import { LEADER_LOCK_KEY } from '../../src/store/db.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';
import { cutDataset, ingestDepsOf, liveEnv } from '../helpers/live.ts';
import { startUpstream } from '../helpers/upstream.ts';

// Two instances on one PostgreSQL database run the live ingest's rounds (docs/live-data.md,
// "Ingest"): only the holder of the leader lock fetches and stores; the other catches up from
// the store. When the leader's database session dies (a crash, a lost connection) or the
// leader stops, the other instance takes the lock at its next round and goes on ingesting;
// the old leader, back, follows.

const stored = (r: Awaited<ReturnType<typeof ingestRound>>) => r.outcomes.reduce((s, o) => s + o.inserted, 0);

test('the leader lock passes to the other instance when the leader session dies or the leader stops', async (t) => {
  if (!(await postgresAvailable())) return t.skip(PG_SKIP);
  const CUT = '2025-04-10';
  let day = addDays(CUT, 3);
  const upstream = await startUpstream();
  upstream.setToday(day);
  /** The upstreams move to the next day (a new candle to ingest). */
  const nextDay = () => {
    day = addDays(day, 1);
    upstream.setToday(day);
  };
  const dir = cutDataset(CUT);
  const db = await createTempPgDatabase();
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  const cfg = testConfig(liveEnv(upstream, dir, { DATABASE_URL: db.url }));
  const cores: Core[] = [];
  try {
    const [a, b] = await Promise.all([createCore(cfg), createCore(cfg)]);
    cores.push(a!, b!);
    await Promise.all([prepareCore(a!), prepareCore(b!)]);
    const A = ingestDepsOf(a!, upstream.baseUrls, CUT, () => day);
    const B = ingestDepsOf(b!, upstream.baseUrls, CUT, () => day);

    // Round 1: A takes the lock and stores the new days; B is refused the lock and catches up.
    const a1 = await ingestRound(A);
    assert.equal(a1.leader, true, 'the first instance to ask becomes the leader');
    assert.ok(stored(a1) > 0, 'the leader stored the new days');
    const b1 = await ingestRound(B);
    assert.equal(b1.leader, false, 'the lock is held: the second instance is not the leader');
    assert.equal(b1.outcomes.length, 0, 'a follower fetches nothing');
    assert.equal(b.market.asOf, a.market.asOf, 'the follower caught up from the store');
    assert.equal((await ingestRound(A)).leader, true, 'the leader keeps the lock from round to round');

    // The leader's session dies (as with a crash or a lost connection): PostgreSQL releases
    // its advisory lock with it.
    const holder = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' AND objid = $1
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [LEADER_LOCK_KEY],
    );
    assert.equal(holder.rows.length, 1, 'one session holds the leader lock');
    // With a timeout, pg_terminate_backend waits until the session has ended (PostgreSQL 14+).
    const killed = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1, 5000) AS ok', [holder.rows[0]!.pid]);
    assert.equal(killed.rows[0]?.ok, true, 'the leader session ended');
    nextDay();
    const b2 = await ingestRound(B);
    assert.equal(b2.leader, true, 'the other instance took the lock at its next round');
    assert.ok(stored(b2) > 0, 'and stored the next day');
    assert.equal(b.market.asOf, addDays(day, -1));
    const a2 = await ingestRound(A);
    assert.equal(a2.leader, false, 'the old leader, reconnected, is now a follower');
    assert.equal(a.market.asOf, b.market.asOf, 'and caught up with what the new leader stored');

    // The new leader stops: the lock goes with its session, and the first instance takes over.
    await b.stop();
    cores.pop();
    nextDay();
    const a3 = await ingestRound(A);
    assert.equal(a3.leader, true, 'after the leader stopped, the remaining instance leads');
    assert.ok(stored(a3) > 0, 'and ingests');
    assert.equal(a.market.asOf, addDays(day, -1));
  } finally {
    for (const c of cores) await c.stop().catch(() => {});
    await admin.end();
    await db.drop();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
