import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { openDatabase, type Database, type Db } from '../../src/store/db.ts';
import { isDependencyDown } from '../../src/errors.ts';
import { createTempPgDatabase, PG_BASE_URL, PG_SKIP, postgresAvailable } from '../helpers/env.ts';

// A PostgreSQL connection ended by the server in the middle of a transaction (a restart, a
// failover, pg_terminate_backend) fails that transaction; it must not end the process. pg's
// pool leaves a checked-out client without an 'error' listener, and a Client that emits
// 'error' with none throws it as an uncaught exception (the process exited 1: an operator's walk).

const available = await postgresAvailable();
if (!available) console.log(PG_SKIP);

let temp: { url: string; drop: () => Promise<void> };
let database: Database;

before(async () => {
  if (!available) return;
  temp = await createTempPgDatabase();
  database = await openDatabase({ databaseUrl: temp.url, pgliteDir: 'unused' });
});
after(async () => {
  await database?.close();
  await temp?.drop();
});

/** Runs a transaction that sleeps on `db`, ends its connection from outside, and returns how the transaction settled. */
async function killedTransaction(db: Db, tag: string): Promise<unknown> {
  const tx = db
    .transaction(async (t) => {
      await t.execute(sql.raw(`select pg_sleep(10) /* ${tag} */`));
    })
    .then(
      () => null,
      (e: unknown) => e,
    );
  const admin = new pg.Client({ connectionString: temp.url });
  await admin.connect();
  try {
    const deadline = Date.now() + 5000;
    for (;;) {
      const r = await admin.query(
        `select pg_terminate_backend(pid) as done from pg_stat_activity where query like $1 and pid <> pg_backend_pid()`,
        [`%${tag}%`],
      );
      if (r.rows.some((x: { done: boolean }) => x.done)) break;
      assert.ok(Date.now() < deadline, 'the transaction never started');
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await admin.end();
  }
  return tx;
}

test(
  'a connection ended by the server mid-transaction fails that transaction, not the process; the pools go on',
  { skip: !available && PG_SKIP },
  async () => {
    for (const [name, db] of [
      ['request pool', database.db],
      ['jobs pool', database.jobs],
    ] as const) {
      const err = await killedTransaction(db, `loss_${name.replace(' ', '_')}`);
      assert.ok(err instanceof Error, `${name}: the transaction rejects`);
      // Give a late 'error' event of the dead client time to be emitted (it used to crash here).
      await new Promise((r) => setTimeout(r, 300));
      const res = await db.execute(sql`select 1 as one`);
      assert.equal((res as unknown as { rows: { one: number }[] }).rows[0]!.one, 1, `${name}: a new query runs`);
    }
  },
);

test(
  'a database that refuses connections (ALLOW_CONNECTIONS false) reads as the database being down: 503, not 500',
  { skip: !available && PG_SKIP },
  async () => {
    const name = new URL(temp.url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: PG_BASE_URL });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1`, [name]);
      await new Promise((r) => setTimeout(r, 100));
      const err = await database.db.execute(sql`select 1`).then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(err instanceof Error, 'the query fails');
      assert.equal(isDependencyDown(err), true, String((err as { cause?: Error }).cause?.message ?? (err as Error).message));
    } finally {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    const res = await database.db.execute(sql`select 1 as one`);
    assert.equal((res as unknown as { rows: { one: number }[] }).rows[0]!.one, 1, 'connections are taken again');
  },
);
