import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, cpSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { adminSocketPath } from '../src/admin/channel.ts';
import { ROOT_DIR } from '../src/config.ts';
import { authUser } from '../src/store/auth-schema.ts';
import { openDatabase } from '../src/store/db.ts';
import { UserRepo } from '../src/store/user-repo.ts';
import { Redis } from 'ioredis';
import { sql } from 'drizzle-orm';
import { PG_BASE_URL, PG_SKIP, postgresAvailable, REDIS_KEY_PREFIX, REDIS_URL } from './helpers/env.ts';
import { type Harness, harnessUnavailable, startHarness } from './helpers/harness.ts';
import { freePort } from './helpers/faults.ts';
import { type NodeRun, runNode, scriptNodeOptions } from './helpers/node-options.ts';

/**
 * The command line as a user meets it (src/cli.ts, run as a child process): help, version and
 * usage errors; configuration errors that name their variable; `users set-tier` for a user who
 * has no key yet, and while a service runs on PGlite (through its admin channel) or on
 * PostgreSQL; and the start-up progress lines.
 */

const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});
function tmpDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'mi-cli-'));
  tmp.push(d);
  return d;
}

/** Runs the CLI (src/cli.ts through tsx) with `args` and only `env` (plus PATH); see runNode. */
function cli(args: string[], env: Record<string, string> = {}, opts: { timeoutMs?: number; until?: RegExp } = {}): Promise<NodeRun> {
  return runNode(['--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), ...args], env, opts);
}

const VERSION = (JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { version: string }).version;

test('help, help <command> and --version print and exit 0', async () => {
  const [help, helpCmd, version, flagHelp] = await Promise.all([
    cli(['help']),
    cli(['help', 'users']),
    cli(['--version']),
    cli(['users', 'set-tier', '--help']),
  ]);
  assert.equal(help.code, 0, help.stderr);
  for (const c of ['serve', 'mcp', 'backfill', 'backtest', 'users', 'help']) assert.match(help.stdout, new RegExp(`\\n  ${c}\\b`), c);
  assert.match(help.stdout, /--data-dir/);
  assert.equal(helpCmd.code, 0, helpCmd.stderr);
  assert.match(helpCmd.stdout, /set-tier <email> <tier>/);
  assert.equal(version.code, 0, version.stderr);
  assert.equal(version.stdout.trim(), VERSION);
  assert.equal(flagHelp.code, 0, flagHelp.stderr);
  assert.match(flagHelp.stdout, /Usage: .*set-tier/);
});

test('the node options of `npm start` and `npm run cli` are accepted by this Node, and PGlite compiles under --liftoff-only', async () => {
  for (const name of ['start', 'cli'] as const) {
    const options = scriptNodeOptions(name);
    assert.ok(options.includes('--liftoff-only'), `${name}: ${options.join(' ')}`);
    // A flag this Node's V8 does not know makes node exit 9 ("bad option") before any code runs.
    const run = await runNode([...options, '-e', 'process.stdout.write("ok")']);
    assert.equal(run.code, 0, `${name} (${options.join(' ')}): ${run.stderr}`);
    assert.equal(run.stdout, 'ok');
  }
  // --liftoff-only makes a function the baseline compiler cannot compile a fatal error instead
  // of a fallback: compile every function of PGlite's module up front (no lazy compilation).
  const wasm = path.join(ROOT_DIR, 'node_modules', '@electric-sql', 'pglite', 'dist', 'pglite.wasm');
  const compiled = await runNode([
    ...scriptNodeOptions('cli'),
    '--no-wasm-lazy-compilation',
    '-e',
    // Synchronous: on Node 24 the process exits before WebAssembly.compile's promise settles.
    `const m = new WebAssembly.Module(require('fs').readFileSync(${JSON.stringify(wasm)})); process.stdout.write(String(WebAssembly.Module.exports(m).length))`,
  ]);
  assert.equal(compiled.code, 0, compiled.stderr);
  assert.ok(Number(compiled.stdout) > 1000, compiled.stdout);
});

test('an unknown command, an unknown option, a bad tier or email and `mcp` without --stdio exit 2 with a clear error', async () => {
  const [cmd, opt, tier, missing, mcp, email, helpCmd] = await Promise.all([
    cli(['servr']),
    cli(['serve', '--prot', '3000']),
    cli(['users', 'set-tier', 'a@example.com', 'gold']),
    cli(['users', 'set-tier', 'a@example.com']),
    cli(['mcp']),
    cli(['users', 'set-tier', 'not-an-email', 'pro']),
    cli(['help', 'servr']),
  ]);
  // `help <unknown command>` names it, as the command itself would (not the whole help, silently).
  assert.equal(helpCmd.code, 2);
  assert.match(helpCmd.stderr, /unknown command 'servr'/);
  assert.match(helpCmd.stderr, /Did you mean serve\?/);
  assert.equal(email.code, 2);
  assert.match(
    email.stderr,
    /'not-an-email' is invalid for argument 'email'\. It is not an email address: give the email the user signed up with/,
  );
  assert.equal(cmd.code, 2);
  assert.match(cmd.stderr, /unknown command 'servr'/);
  assert.match(cmd.stderr, /Did you mean serve\?/);
  assert.equal(opt.code, 2);
  assert.match(opt.stderr, /unknown option '--prot'/);
  assert.equal(tier.code, 2);
  assert.match(tier.stderr, /'gold' is invalid .*Allowed choices are free, pro, api/);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /missing required argument 'tier'/);
  assert.equal(mcp.code, 2);
  assert.match(mcp.stderr, /mcp --stdio/);
});

test('DATA_DIR, HOST, TRUST_PROXY and AS_OF errors name the variable and what to do, without a stack trace', async () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ DATA_DIR: '/nonexistent' }, /DATA_DIR: '\/nonexistent' is not an existing, readable folder/],
    [{ DATA_DIR: tmpDir() }, /DATA_DIR: .* does not hold the dataset/],
    [{ HOST: '999.1.1.1' }, /HOST: '999\.1\.1\.1' is not a valid IPv4 address/],
    [{ TRUST_PROXY: 'notanip' }, /TRUST_PROXY: 'notanip' is not an IP address or CIDR block; list IPs or CIDRs/],
    [{ TRUST_PROXY: '10.0.0.0/33' }, /TRUST_PROXY: '10\.0\.0\.0\/33' has an invalid prefix length/],
    // Checked against the stored data once it is open, and worded like the others.
    [{ AS_OF: '2030-01-01' }, /Invalid configuration:\n {2}AS_OF 2030-01-01 is after the newest day of the data \(2025-09-30\)/],
  ];
  const runs = await Promise.all(cases.map(([env]) => cli(['serve', '--port', '0'], { PGLITE_DIR: 'memory://', ...env })));
  runs.forEach((r, i) => {
    const [env, re] = cases[i]!;
    assert.equal(r.code, 1, JSON.stringify(env));
    assert.match(r.stderr, re);
    assert.match(r.stderr, /Fix this variable/);
    // A command-line flag is named only for the variables that have one.
    if ('TRUST_PROXY' in env) assert.match(r.stderr, /Fix this variable in the environment and start again\./);
    if ('HOST' in env) assert.match(r.stderr, /with its command-line flag \(--host for HOST\)/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });
  // The flag is checked the same way.
  const flag = await cli(['serve', '--host', '999.1.1.1'], { PGLITE_DIR: 'memory://' });
  assert.equal(flag.code, 1);
  assert.match(flag.stderr, /HOST: '999\.1\.1\.1'/);
});

test('serve with a PGLITE_DIR that cannot be created or used exits 1 at once with one line naming it and what to do, no stack trace', async () => {
  const file = path.join(tmpDir(), 'a-file');
  writeFileSync(file, 'x');
  const cases: [string, RegExp][] = [
    [file, /the embedded database folder is a regular file, not a folder/],
    [path.join(file, 'db'), /the embedded database folder cannot be created \(.*a-file is a file, not a folder\)/],
  ];
  // procfs answers ENOENT to every mkdir, where Node's recursive mkdir retried for ever (100 %
  // CPU, SIGTERM ignored); the secret file beside the folder failed first with a raw stack.
  if (existsSync('/proc/self')) cases.push(['/proc/mi-cli-nope', /the embedded database folder cannot be created \(ENOENT: /]);
  // 20 s: a safety kill (the answer takes about a second), not a timing assertion.
  const runs = await Promise.all(cases.map(([dir]) => cli(['serve', '--port', '0'], { PGLITE_DIR: dir }, { timeoutMs: 20_000 })));
  runs.forEach((r, i) => {
    const [dir, said] = cases[i]!;
    assert.equal(r.code, 1, `${dir}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0]!.startsWith(`PGLITE_DIR=${dir}: `), r.stderr);
    assert.match(lines[0]!, said);
    assert.match(lines[0]!, /: set PGLITE_DIR to a writable folder \(it is created when missing\), or DATABASE_URL to use PostgreSQL$/);
    assert.doesNotMatch(r.stderr, /\n\s+at |Failed to start/, 'no stack trace');
  });
  assert.equal(existsSync(`${file}.auth-secret`), false);
});

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

test('users set-tier works while the service runs on PostgreSQL: the CLI connects directly', async (t) => {
  const why = await harnessUnavailable({ database: 'postgres' });
  if (why) {
    console.log(why);
    t.skip(why);
    return;
  }
  const h = await startHarness({ database: 'postgres' });
  try {
    await setTierWhileRunning(h, { DATABASE_URL: h.svc.config.DATABASE_URL! }, /tier set to pro\n/);
  } finally {
    await h.stop();
  }
});

test('users set-tier on PostgreSQL with its Redis down: the tier still reaches the running service (NOTIFY), and the CLI says so in a note, not a warning', async (t) => {
  const why = await harnessUnavailable({ database: 'postgres' });
  if (why) {
    console.log(why);
    t.skip(why);
    return;
  }
  const h = await startHarness({ database: 'postgres' });
  try {
    // A port nothing listens on: the tier epoch cannot be written.
    const down = `redis://127.0.0.1:${await freePort()}`;
    const r = await setTierWhileRunning(h, { DATABASE_URL: h.svc.config.DATABASE_URL!, REDIS_URL: down }, /tier set to pro\n/);
    assert.match(r.stderr, /^note: tier epoch \(Redis\) failed \(.+\); running services were told through PostgreSQL NOTIFY/);
    assert.doesNotMatch(r.stderr, /warning/);
  } finally {
    await h.stop();
  }
});

test('users set-tier on PostgreSQL + Redis moves the tier epoch under the deployment REDIS_KEY_PREFIX', async (t) => {
  const why = await harnessUnavailable({ database: 'postgres', redis: true });
  if (why) {
    console.log(why);
    t.skip(why);
    return;
  }
  const h = await startHarness({ database: 'postgres', redis: true });
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
    await h.stop();
  }
});

test('start-up logs one JSON line per phase with its duration, then ready', async () => {
  const r = await cli(['serve', '--port', '0'], { PGLITE_DIR: 'memory://', AUTH_SECRET: 'x'.repeat(40) }, { until: /service ready/ });
  const lines = r.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { phase?: string; ms?: number; msg: string });
  const phases = lines.filter((l) => l.phase);
  // The identity provider is created once the service listens, in the background (better-auth
  // is not needed to become ready); stopping waits for it, so its line comes before the exit.
  assert.deepEqual(
    phases.map((l) => l.phase),
    ['begin', 'database', 'import', 'dataset', 'series', 'http', 'backfill', 'warm', 'listen', 'identity'],
    r.stdout + r.stderr,
  );
  for (const p of phases.slice(1)) {
    assert.equal(typeof p.ms, 'number', p.phase);
    assert.ok(p.ms! >= 0);
    assert.match(p.msg, /^start-up: /);
  }
  // The ready line says how the instance runs.
  const ready = lines.find((l) => /service ready/.test(l.msg));
  assert.ok(ready, 'ready line');
  assert.match(
    ready.msg,
    /^market-intelligence service ready: offline \(the bundled dataset as of 2025-09-30\), database pglite, rate limits in memory \(this instance only: REDIS_URL unset\), identity provider embedded$/,
  );
  assert.equal(r.code, 0, 'SIGTERM stops it cleanly');
});

test('backfill on a database from before level_rule: its backfill line says how many stored changes got their rule and how many stay null, once; later lines say the fill is done', async () => {
  const pgliteDir = path.join(tmpDir(), 'pglite');
  const backfillLine = (r: NodeRun) => {
    assert.equal(r.code, 0, r.stderr);
    const line = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.phase === 'backfill');
    assert.ok(line, r.stdout);
    return line;
  };
  const first = backfillLine(await cli(['backfill'], { PGLITE_DIR: pgliteDir }));
  assert.ok((first.inserted as number) > 500);
  assert.equal(first.level_rule_filled, 0);
  assert.equal(first.level_rule_left_null, 0);
  // As a database of an earlier version left it: no rule stored, no fill recorded; one stored
  // score unlike today's computation.
  const db = await openDatabase({ pgliteDir });
  try {
    await db.db.execute(sql`UPDATE signal_history SET level_rule = NULL`);
    await db.db.execute(sql`UPDATE backfill_state SET level_rule_version = NULL`);
    await db.db.execute(
      sql`UPDATE signal_history SET score = score + 0.0001 WHERE id = (SELECT min(id) FROM signal_history WHERE asset = 'ethereum')`,
    );
  } finally {
    await db.close();
  }
  const second = backfillLine(await cli(['backfill'], { PGLITE_DIR: pgliteDir }));
  assert.deepEqual(
    { inserted: second.inserted, skipped: second.skipped, filled: second.level_rule_filled, left: second.level_rule_left_null },
    { inserted: 0, skipped: 11, filled: (first.inserted as number) - 1, left: 1 },
  );
  assert.equal(second.level_rule_fill, undefined);
  // Filled once: the next run does not look again (the row that differs stays null).
  const third = backfillLine(await cli(['backfill'], { PGLITE_DIR: pgliteDir }));
  assert.deepEqual(
    { filled: third.level_rule_filled, left: third.level_rule_left_null, fill: third.level_rule_fill },
    { filled: undefined, left: undefined, fill: 'done before' },
  );
});

test('shutdown is bounded: a client stalled mid-request does not hold the process past SHUTDOWN_TIMEOUT_MS', async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), 'serve', '--port', String(port)], {
    cwd: ROOT_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      PGLITE_DIR: 'memory://',
      AUTH_SECRET: 'x'.repeat(40),
      SHUTDOWN_TIMEOUT_MS: '1500',
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
  const kill = setTimeout(() => child.kill('SIGKILL'), 120_000);
  try {
    const deadline = Date.now() + 100_000;
    while (!/service ready/.test(out)) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `the service did not start:\n${out.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // A request whose body never arrives: the connection is not idle, so the HTTP server's close waits for it.
    const s = createConnection({ port, host: '127.0.0.1' });
    await once(s, 'connect');
    s.write(
      `POST /api/v1/thesis HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"asset":`,
    );
    s.on('error', () => {});
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    child.kill('SIGTERM');
    const [code] = await exited;
    const took = Date.now() - t0;
    s.destroy();
    assert.equal(code, 1, out.slice(-2000));
    assert.ok(took < 60_000, `exited after ${took} ms`);
    assert.match(out, /shutdown did not finish in time/);
  } finally {
    clearTimeout(kill);
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});

test('a start that fails (port in use) prints its error after every log line when stdout and stderr share a file', async () => {
  // serve's log is asynchronous (buffered): its last lines used to reach the file after the
  // error on stderr, pino flushing them only at exit.
  const busy = createServer().listen(0, '127.0.0.1');
  await once(busy, 'listening');
  const port = (busy.address() as AddressInfo).port;
  const file = path.join(tmpDir(), 'out.log');
  const fd = openSync(file, 'w');
  try {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), 'serve', '--port', String(port), '--host', '127.0.0.1'],
      {
        cwd: ROOT_DIR,
        stdio: ['ignore', fd, fd],
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', PGLITE_DIR: 'memory://', AUTH_SECRET: 'x'.repeat(40) },
      },
    );
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    assert.equal(code, 1, lines.join('\n'));
    assert.match(lines.at(-1)!, /^Failed to start: the port is in use/, lines.join('\n'));
    const logged = lines.slice(0, -1).map((l) => JSON.parse(l) as { phase?: string });
    assert.ok(
      logged.some((l) => l.phase === 'warm'),
      'the last start-up phase before listen is in the file, before the error',
    );
  } finally {
    closeSync(fd);
    busy.close();
  }
});

test('backtest: the table by default; bad options are one-line errors', async () => {
  const [table, badDay, badCost, badModel] = await Promise.all([
    cli(['backtest', '--from', '2025-01-01', '--to', '2025-06-30', '--model', 'signals-v1']),
    cli(['backtest', '--from', '2025-02-30']),
    cli(['backtest', '--cost-bps', 'ten']),
    cli(['backtest', '--model', 'signals-v7']),
  ]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^signals-v1, fixed parameters \(bands 0.1\/0.5\), 2025-01-01 → 2025-06-30, 10 bps/);
  assert.match(table.stdout, /\nBTC +/);
  assert.match(table.stdout, /\npooled +/);
  assert.match(table.stdout, /levels \(share of asset-days\): strong_buy/);
  assert.equal(badDay.code, 2);
  assert.equal(badDay.stderr, "--from must be a calendar day YYYY-MM-DD, got '2025-02-30'\n");
  assert.equal(badCost.code, 2);
  assert.match(badCost.stderr, /^--cost-bps must be a number, got 'ten'\n$/);
  assert.equal(badModel.code, 2);
  assert.match(badModel.stderr, /^unknown model 'signals-v7': use signals-v1, signals-v2, signals-v3, signals-v4\n$/);
});

test('backtest: a window past the data is clamped to it and says so; a window without data is an error naming the days the data covers', async () => {
  const [table, json, none, unscored, future] = await Promise.all([
    cli(['backtest', '--from', '2025-01-01', '--to', '2030-01-01', '--model', 'signals-v1']),
    cli(['backtest', '--from', '1990-01-01', '--to', '2030-01-01', '--model', 'signals-v1', '--json']),
    cli(['backtest', '--from', '1990-01-01', '--to', '1990-02-01']),
    cli(['backtest', '--from', '2025-09-30']),
    cli(['backtest', '--from', '2030-01-01']),
  ]);
  // The header names the window evaluated; one line on stderr says it was clamped.
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^signals-v1, fixed parameters \(bands 0.1\/0.5\), 2025-01-01 → 2025-09-30, 10 bps/);
  assert.equal(table.stderr, 'note: the data ends 2025-09-30; evaluated to 2025-09-30\n');
  // The JSON report is the same window (stdout stays JSON: the note is on stderr).
  assert.equal(json.code, 0, json.stderr);
  const report = JSON.parse(json.stdout) as { from: string; to: string; pooled: { from: string; to: string; days: number } };
  assert.deepEqual(
    [report.from, report.to, report.pooled.from, report.pooled.to],
    ['2018-03-17', '2025-09-30', '2018-03-17', '2025-09-30'],
  );
  assert.ok(report.pooled.days > 0);
  assert.equal(json.stderr, 'note: the data covers 2018-03-17 to 2025-09-30; evaluated 2018-03-17 → 2025-09-30\n');
  // No data in the window: a one-line error and exit 2 (a usage error), as for the other bad options; no report.
  assert.equal(none.code, 2);
  assert.equal(none.stdout, '');
  assert.equal(
    none.stderr,
    'no data in 1990-01-01 → 1990-02-01: the data covers 2018-03-17 to 2025-09-30; choose --from and --to within it\n',
  );
  // The last day has no next day's close: nothing in the window can be scored.
  assert.equal(unscored.code, 2);
  assert.equal(unscored.stdout, '');
  assert.match(
    unscored.stderr,
    /^nothing to evaluate in 2025-09-30 → 2025-09-30: no day in it has a next day's close to score it \(the data covers 2018-03-17 to 2025-09-30\)/,
  );
  // --from after the data without --to: the message names the default --to (the as-of day), not a --to never given.
  assert.equal(future.code, 2);
  assert.equal(
    future.stderr,
    '--from (2030-01-01) is after the as-of day 2025-09-30, the default --to: the data covers 2018-03-17 to 2025-09-30; choose --from within it\n',
  );
});

test('backtest --walk-forward scores from 2020 only: an earlier --from is clamped with a note, a window before 2020 is a usage error', async () => {
  const [early, before] = await Promise.all([
    cli(['backtest', '--walk-forward', '--from', '2019-06-01', '--to', '2020-03-31', '--json']),
    cli(['backtest', '--walk-forward', '--from', '2019-01-01', '--to', '2019-12-31']),
  ]);
  // Days of 2019 would be scored with 2020's bands, chosen on data that includes them.
  assert.equal(early.code, 0, early.stderr);
  const report = JSON.parse(early.stdout) as { from: string; pooled: { from: string }; choices: { year: number }[] };
  assert.deepEqual([report.from, report.pooled.from, report.choices.map((c) => c.year)], ['2020-01-01', '2020-01-01', [2020]]);
  // Published with 6 significant digits (computed exactly, rounded on the way out).
  const figures = (v: unknown): number[] =>
    typeof v === 'number' ? [v] : v !== null && typeof v === 'object' ? Object.values(v).flatMap(figures) : [];
  const fractional = figures(report).filter((x) => !Number.isInteger(x));
  assert.ok(fractional.length > 0);
  for (const x of fractional) assert.equal(x, Number(x.toPrecision(6)), String(x));
  assert.match(early.stderr, /^note: walk-forward mode scores from 2020-01-01 \(each year's bands are chosen on the data before it/);
  assert.equal(before.code, 2);
  assert.equal(before.stdout, '');
  assert.match(before.stderr, /^--walk-forward scores the years from 2020 .* --to 2019-12-31 is before 2020-01-01/);
});

test('ingest --once: one live round against local upstreams, a JSON line per series and a summary; a second round stores nothing new', async () => {
  const { startUpstream } = await import('./helpers/upstream.ts');
  const { cutDataset, liveEnv } = await import('./helpers/live.ts');
  const upstream = await startUpstream();
  // The fake serves the bundled data up to its end (2025-09-30); the service starts 5 days before.
  upstream.setToday('2025-10-01');
  const dataDir = cutDataset('2025-09-25');
  tmp.push(dataDir);
  const env = { ...liveEnv(upstream, dataDir), LIVE: '0', PGLITE_DIR: path.join(tmpDir(), 'pglite') };
  try {
    const first = await cli(['ingest', '--once'], env, { timeoutMs: 240_000 });
    assert.equal(first.code, 0, first.stderr + first.stdout);
    const lines = first.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const summary = lines.at(-1)!;
    assert.equal(summary.failed, 0, first.stdout);
    assert.equal(summary.as_of, '2025-09-30');
    assert.ok((summary.rows as number) > 0);
    const btc = lines.find((l) => l.series === 'candles:bitcoin')!;
    assert.deepEqual([btc.after, btc.inserted], ['2025-09-25', 5]);
    const second = await cli(['ingest', '--once'], env, { timeoutMs: 240_000 });
    assert.equal(second.code, 0, second.stderr);
    const again = second.stdout
      .split('\n')
      .filter((l) => l.startsWith('{"series":"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(again.find((l) => l.series === 'candles:bitcoin')!.after, '2025-09-30', 'fetches only what is newer than the store holds');
    assert.ok(
      again.every((l) => l.inserted === 0),
      second.stdout,
    );
  } finally {
    await upstream.close();
  }
});

test('serve on a PostgreSQL that refuses the start says why and what to do: no such database, refused role, no server', async (t) => {
  if (!(await postgresAvailable())) return t.skip(PG_SKIP);
  const env = (url: string) => ({ DATABASE_URL: url, AUTH_SECRET: 'x'.repeat(40), PORT: '0' });
  const base = new URL(PG_BASE_URL);
  const at = (edit: (u: URL) => void) => {
    const u = new URL(base);
    edit(u);
    return u.toString();
  };
  for (const [url, said] of [
    [
      at((u) => (u.pathname = '/no_such_database_for_this_test')),
      /^Failed to start: the database named in DATABASE_URL does not exist \(PostgreSQL: database "no_such_database_for_this_test" does not exist\): create it/m,
    ],
    [
      at((u) => (u.username = 'no_such_role_for_this_test')),
      /^Failed to start: PostgreSQL refused the user or password in DATABASE_URL \(PostgreSQL: .*no_such_role_for_this_test.*\): fix them/m,
    ],
    [at((u) => (u.port = '1')), /^Failed to start: cannot connect to the PostgreSQL server in DATABASE_URL \(ECONNREFUSED\)/m],
  ] as const) {
    const r = await cli(['serve'], env(url));
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, said, r.stderr);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
});
