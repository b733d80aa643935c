import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createConnection, createServer } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT_DIR } from '../src/config.ts';
import { openDatabase } from '../src/store/db.ts';
import { sql } from 'drizzle-orm';
import { freePort } from './helpers/faults.ts';
import { type NodeRun, runNode, scriptNodeOptions } from './helpers/node-options.ts';
import { cli, tmpDir } from './helpers/cli.ts';

/**
 * The command line as a user meets it (src/cli.ts, run as a child process): help, version and
 * usage errors; configuration errors that name their variable; the start-up progress lines,
 * the backfill line, bounded shutdown and a failed start. `users set-tier`: test/cli-users.test.ts;
 * backtest, ingest and PostgreSQL refusals: test/cli-jobs.test.ts.
 */

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

/**
 * Runs `serve` (in-memory database, SHUTDOWN_TIMEOUT_MS `shutdownMs`) until it is ready, opens a
 * request whose body never arrives (the connection is not idle, so the HTTP server's close
 * waits for it), then runs `body` with the child, its output so far, and its exit. Killed after
 * 120 s whatever happens.
 */
async function withStalledRequest(
  shutdownMs: number,
  body: (child: ReturnType<typeof spawn>, out: () => string, exited: Promise<[number | null, string | null]>) => Promise<void>,
): Promise<void> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), 'serve', '--port', String(port)], {
    cwd: ROOT_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      PGLITE_DIR: 'memory://',
      AUTH_SECRET: 'x'.repeat(40),
      SHUTDOWN_TIMEOUT_MS: String(shutdownMs),
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
  const kill = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const s = createConnection({ port, host: '127.0.0.1' });
  s.on('error', () => {});
  try {
    const deadline = Date.now() + 100_000;
    while (!/service ready/.test(out)) {
      assert.ok(Date.now() < deadline && child.exitCode === null, `the service did not start:\n${out.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    s.connect({ port, host: '127.0.0.1' });
    await once(s, 'connect');
    s.write(
      `POST /api/v1/thesis HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"asset":`,
    );
    await new Promise((r) => setTimeout(r, 300));
    await body(child, () => out, exited);
  } finally {
    s.destroy();
    clearTimeout(kill);
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

test('shutdown is bounded: a client stalled mid-request does not hold the process past SHUTDOWN_TIMEOUT_MS', async () => {
  await withStalledRequest(1500, async (child, out, exited) => {
    const t0 = Date.now();
    child.kill('SIGTERM');
    const [code] = await exited;
    const took = Date.now() - t0;
    assert.equal(code, 1, out().slice(-2000));
    assert.ok(took < 60_000, `exited after ${took} ms`);
    assert.match(out(), /shutdown did not finish in time/);
  });
});

test('one Ctrl+C that arrives twice (a terminal signals npm and the service, npm forwards its own) is one: a later SIGINT is the second, which exits at once', async () => {
  // The stalled request keeps the graceful stop waiting (up to SHUTDOWN_TIMEOUT_MS).
  await withStalledRequest(30_000, async (child, out, exited) => {
    // npm forwards its SIGINT a few milliseconds after the terminal's (two sent at once would
    // be merged into one by the kernel).
    child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(child.exitCode, null, `the doubled Ctrl+C ended the process:\n${out().slice(-2000)}`);
    assert.match(out(), /shutting down/);
    assert.doesNotMatch(out(), /second Ctrl\+C/);
    const t0 = Date.now();
    child.kill('SIGINT');
    const [code] = await exited;
    assert.equal(code, 1, out().slice(-2000));
    assert.ok(Date.now() - t0 < 10_000, `a second Ctrl+C exits at once (took ${Date.now() - t0} ms)`);
    assert.match(out(), /second Ctrl\+C during shutdown: exiting now/);
  });
});

/** The `phase` of each JSON log line of `stdout` (start-up progress: begin, database, import, ...). */
function phasesOf(stdout: string): string[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { phase?: string }).phase)
    .filter((p): p is string => p !== undefined);
}

test('SIGTERM during the start-up of serve ends it at its next phase: the database closed cleanly, exit 0, never ready', async () => {
  // Before, the process died at once, whatever PGlite was writing (the dataset import).
  const dir = path.join(tmpDir(), 'pglite');
  // The next phase (the dataset import) takes over 10 s on a loaded machine: a bound the test
  // is not about (SHUTDOWN_TIMEOUT_MS exits at once with 1 when the stop overruns it).
  const env = { PGLITE_DIR: dir, SHUTDOWN_TIMEOUT_MS: '120000' };
  const r = await cli(['serve', '--port', '0'], env, { until: /"phase":"database"/ });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /"signal":"SIGTERM","timeout_ms":120000.*stopping during start-up: it ends at its next phase/);
  assert.match(r.stdout, /stopped during start-up \(the database was closed cleanly\)/);
  assert.doesNotMatch(r.stdout, /service ready|"phase":"backfill"/, 'the start-up did not run to its end');
  assert.equal(r.stderr, '');
});

test('serve --as-of a day past the data is refused before the dataset import: exit 1, the reason, no import logged', async () => {
  const r = await cli(['serve', '--port', '0', '--as-of', '2030-01-01'], { PGLITE_DIR: 'memory://' });
  assert.equal(r.code, 1, r.stderr);
  assert.equal(
    r.stderr,
    'Invalid configuration:\n  AS_OF 2030-01-01 is after the newest day of the data (2025-09-30); use 2025-09-30 or earlier\nFix this variable in the environment (or --as-of) and start again.\n',
  );
  const phases = phasesOf(r.stdout);
  assert.ok(phases.includes('database'), phases.join(','));
  for (const late of ['import', 'dataset', 'series'])
    assert.ok(!phases.includes(late), `${late} logged before the refusal: ${phases.join(',')}`);
});

test('serve on a port in use is refused before the database and the dataset import: exit 1, what to do, no start-up logged', async () => {
  const busy = createServer().listen(0, '127.0.0.1');
  await once(busy, 'listening');
  const port = (busy.address() as AddressInfo).port;
  try {
    const r = await cli(['serve', '--port', String(port), '--host', '127.0.0.1'], { PGLITE_DIR: 'memory://' });
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `^Failed to start: the port is in use \\(listen EADDRINUSE: address already in use 127\\.0\\.0\\.1:${port}\\); set PORT \\(or --port\\) to a free port, or stop the other process\\n$`,
      ),
    );
    assert.deepEqual(phasesOf(r.stdout), [], 'nothing of the start-up (begin, database, import) ran');
  } finally {
    busy.close();
  }
});

test('serve with a HOST that is no address of this machine is refused before the start-up: exit 1, what to do, no stack trace', async () => {
  // 192.0.2.1: TEST-NET-1 (RFC 5737), never an address of a real machine.
  const r = await cli(['serve', '--port', String(await freePort()), '--host', '192.0.2.1'], { PGLITE_DIR: 'memory://' });
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(
    r.stderr,
    /^Failed to start: HOST is not an address of this machine \(listen EADDRNOTAVAIL: .*\); set HOST \(or --host\) to one of its addresses, 127\.0\.0\.1 for this machine only or 0\.0\.0\.0 for every interface\n$/,
  );
  assert.deepEqual(phasesOf(r.stdout), [], 'refused before the database and the dataset import');
});

test('a start that fails at listen (the port taken during the start-up) prints its error after every log line when stdout and stderr share a file', async () => {
  // serve's log is asynchronous (buffered): its last lines used to reach the file after the
  // error on stderr, pino flushing them only at exit. A port in use is refused before any log
  // line now (assertPortFree), so the port is taken once the start-up is under way: the listen
  // after the last phase (warm) fails, with that phase's line still fresh in the buffer.
  const port = await freePort();
  const file = path.join(tmpDir(), 'out.log');
  const fd = openSync(file, 'w');
  const busy = createServer();
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
    const exited = once(child, 'exit') as Promise<[number | null]>;
    // The series phase is followed by the backfill and the answer cache (a second or so) before the listen.
    while (!readFileSync(file, 'utf8').includes('"phase":"series"') && child.exitCode === null) await new Promise((r) => setTimeout(r, 10));
    busy.listen(port, '127.0.0.1');
    await once(busy, 'listening');
    const [code] = await exited;
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
