import assert from 'node:assert/strict';
import { chownSync, cpSync, existsSync, statSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { AdminChannelError, adminSocketPath, requestSetTier } from '../src/admin/channel.ts';
import { authUser } from '../src/store/auth-schema.ts';
import { openDatabase } from '../src/store/db.ts';
import { UserRepo } from '../src/store/user-repo.ts';
import { Redis } from 'ioredis';
import { REDIS_KEY_PREFIX, REDIS_URL } from './helpers/env.ts';
import { type Harness, startHarness, withHarness } from './helpers/harness.ts';
import { freePort } from './helpers/faults.ts';
import { cli, tmpDir } from './helpers/cli.ts';

/**
 * `users set-tier` as a user meets it (src/cli.ts, run as a child process): for a user who has
 * no key yet, and while a service runs on PGlite (through its admin channel) or on PostgreSQL,
 * with and without Redis. (Split from test/cli.test.ts.)
 */

/** Registers a user with the embedded identity provider's table only (as sign-up does): no app_users row, no key. */
async function registerUser(db: Awaited<ReturnType<typeof openDatabase>>['db'], id: string, email: string): Promise<void> {
  await db.insert(authUser).values({ id, name: id, email });
}

/** A migrated on-disk PGlite folder, copied by the tests that need one (creating one takes a while). */
let migrated: string | undefined;
async function migratedPglite(): Promise<string> {
  if (!migrated) {
    migrated = path.join(tmpDir(), 'template');
    await (await openDatabase({ pgliteDir: migrated })).close();
  }
  const dir = path.join(tmpDir(), 'pglite');
  cpSync(migrated, dir, { recursive: true });
  return dir;
}

test('users set-tier sets the plan of a registered user who has no key yet; an unknown email says why', async () => {
  const pgliteDir = await migratedPglite();
  const db = await openDatabase({ pgliteDir });
  await registerUser(db.db, 'user-nokey', 'nokey@example.com');
  assert.equal(await new UserRepo(db.db).userTier('user-nokey'), null, 'no app_users row before');
  await db.close();

  const r = await cli(['users', 'set-tier', 'NoKey@Example.com', 'pro'], { PGLITE_DIR: pgliteDir });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /NoKey@Example\.com: tier set to pro/);
  // The embedded provider verifies no address: the operator is told to check who owns the account.
  assert.match(
    r.stderr,
    /^note: the embedded identity provider does not verify email addresses, so whoever signed up first as NoKey@Example\.com now has the pro plan/m,
  );

  const unknown = await cli(['users', 'set-tier', 'ghost@example.com', 'pro'], { PGLITE_DIR: pgliteDir });
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /No user with email ghost@example\.com: nobody has signed up with it/);
  assert.ok(unknown.stderr.includes(`looked up in the database at PGLITE_DIR=${pgliteDir}`), unknown.stderr);
  // A PGLITE_DIR with no database: said so, and none is created just to look.
  const missing = path.join(tmpDir(), 'no-such-db');
  const none = await cli(['users', 'set-tier', 'ghost@example.com', 'pro'], { PGLITE_DIR: missing });
  assert.equal(none.code, 1);
  assert.ok(none.stderr.includes(`there is no database at PGLITE_DIR=${missing} (none was created)`), none.stderr);
  assert.equal(existsSync(missing), false);
  const external = await cli(['users', 'set-tier', 'ghost@example.com', 'pro'], {
    PGLITE_DIR: pgliteDir,
    AUTH_ISSUER: 'https://idp.example.com',
  });
  assert.equal(external.code, 1);
  assert.match(external.stderr, /external identity provider .*JWT's `sub`.*first key or thesis/);
  // Two users of an external provider (two `sub`s) whose tokens carried the same email claim:
  // both are changed, and the command says so instead of reporting one upgrade.
  const shared = await openDatabase({ pgliteDir });
  await new UserRepo(shared.db).ensureUser('ext-sub-1', 'shared@example.com');
  await new UserRepo(shared.db).ensureUser('ext-sub-2', 'shared@example.com');
  await shared.close();
  const two = await cli(['users', 'set-tier', 'shared@example.com', 'pro'], {
    PGLITE_DIR: pgliteDir,
    AUTH_ISSUER: 'https://idp.example.com',
  });
  assert.equal(two.code, 0, two.stderr);
  assert.match(two.stdout, /^shared@example\.com: tier set to pro for 2 accounts$/m);
  assert.match(two.stderr, /^note: 2 accounts have the email shared@example\.com .*check that each is your customer's/m);

  const again = await openDatabase({ pgliteDir });
  try {
    assert.equal(await new UserRepo(again.db).userTier('user-nokey'), 'pro');
  } finally {
    await again.close();
  }
});

/**
 * While `h` runs: set-tier for a user with a key (whose look-up the service has cached) takes
 * effect on the next request, and for a registered user without a key creates their row.
 */
async function setTierWhileRunning(h: Harness, env: Record<string, string>, expectVia: RegExp): Promise<{ stderr: string }> {
  const k = await h.keyFor('free');
  const before = await h.request('GET', '/api/v1/signal-history/btc', { token: k.key });
  assert.equal(before.status, 403, before.raw);
  assert.equal(before.headers['x-service-tier'], 'free');

  const r = await cli(['users', 'set-tier', k.email, 'pro'], env, { timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, expectVia);
  // The running service learns of it by a notice (PostgreSQL NOTIFY, delivered asynchronously,
  // or the admin channel): poll briefly rather than assume it arrived before the next request.
  let afterSet = await h.request('GET', '/api/v1/signal-history/btc', { token: k.key });
  for (let i = 0; i < 25 && afterSet.headers['x-service-tier'] !== 'pro'; i++) {
    await new Promise((r) => setTimeout(r, 200));
    afterSet = await h.request('GET', '/api/v1/signal-history/btc', { token: k.key });
  }
  assert.equal(afterSet.status, 200, afterSet.raw);
  assert.equal(afterSet.headers['x-service-tier'], 'pro');
  // Counts are kept per tier (README, "Tiers and rate limits"): the free request above does not carry over.
  assert.equal(afterSet.headers['x-ratelimit-limit'], '5000');
  assert.equal(afterSet.headers['x-ratelimit-remaining'], '4999');

  await registerUser(h.svc.database.db, `${k.userId}-nokey`, `${k.userId}-nokey@example.com`);
  const r2 = await cli(['users', 'set-tier', `${k.userId}-nokey@example.com`, 'api'], env, { timeoutMs: 60_000 });
  assert.equal(r2.code, 0, r2.stderr);
  assert.equal(await h.svc.repos.users.userTier(`${k.userId}-nokey`), 'api');
  return r;
}

test('users set-tier works while the service runs on PGlite: through its 0600 admin socket, evicting its key cache', async () => {
  const pgliteDir = await migratedPglite();
  const h = await startHarness({ config: { PGLITE_DIR: pgliteDir } });
  try {
    const socket = adminSocketPath(pgliteDir);
    assert.equal(statSync(socket).mode & 0o777, 0o600);
    await setTierWhileRunning(h, { PGLITE_DIR: pgliteDir }, /tier set to pro \(by the running service\)/);
    // Commands that need the database to themselves say which process holds it and the three ways out.
    const busy = await cli(['backfill'], { PGLITE_DIR: pgliteDir });
    assert.notEqual(busy.code, 0);
    assert.match(busy.stderr, new RegExp(`in use by process ${process.pid} .*Stop it first, .*PGLITE_DIR .*DATABASE_URL`));
    // Nothing but set-tier is accepted.
    const answer = await new Promise<string>((resolve, reject) => {
      let buf = '';
      const s = createConnection(socket, () => s.write('{"op":"drop-database"}\n'));
      s.on('data', (d) => (buf += d));
      s.on('end', () => resolve(buf));
      s.on('error', reject);
      setTimeout(() => reject(new Error('no answer in 5 s')), 5000).unref();
    });
    assert.deepEqual(JSON.parse(answer), {
      ok: false,
      error: { code: 'BAD_REQUEST', message: 'unknown op "drop-database": the only operation is "set-tier"' },
    });
  } finally {
    await h.stop();
  }
  assert.throws(() => statSync(adminSocketPath(pgliteDir)), /ENOENT/, 'the socket is removed at stop');
});

test('users set-tier works while the service runs on PostgreSQL: the CLI connects directly', (t) =>
  withHarness(t, { database: 'postgres' }, async (h) => {
    await setTierWhileRunning(h, { DATABASE_URL: h.svc.config.DATABASE_URL! }, /tier set to pro\n/);
  }));

test('users set-tier on PostgreSQL with its Redis down: the tier still reaches the running service (NOTIFY), and the CLI says so in a note, not a warning', (t) =>
  withHarness(t, { database: 'postgres' }, async (h) => {
    // A port nothing listens on: the tier epoch cannot be written.
    const down = `redis://127.0.0.1:${await freePort()}`;
    const r = await setTierWhileRunning(h, { DATABASE_URL: h.svc.config.DATABASE_URL!, REDIS_URL: down }, /tier set to pro\n/);
    assert.match(r.stderr, /^note: tier epoch \(Redis\) failed \(.+\); running services were told through PostgreSQL NOTIFY/);
    assert.doesNotMatch(r.stderr, /warning/);
  }));

test('users set-tier on PostgreSQL + Redis moves the tier epoch under the deployment REDIS_KEY_PREFIX', (t) =>
  withHarness(t, { database: 'postgres', redis: true }, async (h) => {
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      const epoch = async () => Number((await redis.get(`${REDIS_KEY_PREFIX}kc:epoch`)) ?? 0);
      const before = await epoch();
      await setTierWhileRunning(h, { DATABASE_URL: h.svc.config.DATABASE_URL!, REDIS_URL, REDIS_KEY_PREFIX }, /tier set to pro\n/);
      assert.equal(await epoch(), before + 2, 'each of the two set-tier calls moved the epoch the instances check');
    } finally {
      // The epoch outlives the services (it has no expiry): leave nothing in the machine's Redis.
      await redis.del(`${REDIS_KEY_PREFIX}kc:epoch`).catch(() => {});
      redis.disconnect();
    }
  }));

test(
  "the admin channel's client sends nothing to a socket of another OS user (one planted while no service ran)",
  { skip: process.getuid?.() === 0 ? false : 'SKIPPED: needs root, to give the socket file to another user (chown)' },
  async () => {
    const dir = tmpDir();
    const socket = adminSocketPath(path.join(dir, 'pglite'));
    let received = '';
    const planted = createServer((c) => c.on('data', (d) => (received += d)).end('{"ok":true,"users":1}\n'));
    await new Promise<void>((resolve) => planted.listen(socket, resolve));
    try {
      chownSync(socket, 65534, 65534);
      await assert.rejects(
        requestSetTier(socket, 'victim@example.com', 'api', 2000),
        (e: unknown) => e instanceof AdminChannelError && /belongs to another OS user \(uid 65534, not 0\)/.test(e.message),
      );
      assert.equal(received, '', 'neither the email nor the tier was sent');
      // The same socket, given back to this user: asked as before.
      chownSync(socket, 0, 0);
      assert.equal(await requestSetTier(socket, 'victim@example.com', 'api', 2000), 1);
      assert.match(received, /victim@example\.com/);
    } finally {
      await new Promise((resolve) => planted.close(resolve));
    }
  },
);
