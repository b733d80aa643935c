import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { PG_BASE_URL, PG_SKIP, postgresAvailable } from './helpers/env.ts';
import { cli, removeAfter, tmpDir } from './helpers/cli.ts';

/**
 * The command line's jobs as a user meets them (src/cli.ts, run as a child process):
 * `backtest` and its options, `ingest --once` against local upstreams, and `serve` on a
 * PostgreSQL that refuses the start. (Split from test/cli.test.ts so that each file stays well
 * within the runner's per-file time.)
 */

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
  removeAfter(dataDir);
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

/**
 * Runs `serve` against a fake PostgreSQL on loopback whose connections `onConnection` handles,
 * and checks what every refused start shares: exit 1, one `Failed to start` line matching
 * `expected`, no stack trace, no `{}` and never the password of DATABASE_URL. Closes the fake.
 * @returns the run's stderr and how long it took, ms.
 */
async function serveAgainstFakePostgres(onConnection: (s: net.Socket) => void, expected: RegExp): Promise<{ stderr: string; ms: number }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    onConnection(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  try {
    const started = Date.now();
    const r = await cli(['serve'], {
      DATABASE_URL: `postgres://svc:pw-not-logged@127.0.0.1:${port}/market`,
      AUTH_SECRET: 'x'.repeat(40),
      PORT: '0',
    });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, expected, r.stderr);
    assert.doesNotMatch(r.stderr, /\{\}|pw-not-logged|\n\s+at /, r.stderr);
    return { stderr: r.stderr, ms: Date.now() - started };
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
  }
}

/**
 * A fake PostgreSQL connection handler that answers the client's start-up message with a
 * FATAL ErrorResponse of `sqlstate` and `message` (the protocol's 'E' message), then closes.
 */
function refuseWith(sqlstate: string, message: string): (s: net.Socket) => void {
  const field = (type: string, value: string) => Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])]);
  const fields = Buffer.concat([field('S', 'FATAL'), field('V', 'FATAL'), field('C', sqlstate), field('M', message), Buffer.from([0])]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  return (s) => s.once('data', () => s.end(Buffer.concat([head, fields])));
}

test('serve on a PostgreSQL that accepts connections but never answers (stalled) fails within its connection bound, saying so', async () => {
  // A listener that accepts and says nothing: what a stalled (SIGSTOPped) server looks like
  // to a client. The start-up's connection waits at most 5 s (src/store/db.ts, the jobs pool).
  const { ms } = await serveAgainstFakePostgres(
    () => {},
    /^Failed to start: cannot connect to the PostgreSQL server in DATABASE_URL \(no answer in time\): check that it runs/m,
  );
  assert.ok(ms < 30_000, `exited after ${ms} ms`);
});

test('serve on a PostgreSQL that closes the connection during the start (restarting) says so, not "try again shortly ({})"', async () => {
  // A listener that reads the start-up message and closes (FIN) or resets (RST, as a close with
  // the message still unread does): a server going down, or a proxy without one behind it.
  for (const close of [(s: net.Socket) => s.end(), (s: net.Socket) => s.resetAndDestroy()]) {
    await serveAgainstFakePostgres(
      (s) => s.once('data', () => close(s)),
      /^Failed to start: the PostgreSQL server in DATABASE_URL closed the connection during the start/m,
    );
  }
});

test('serve on a PostgreSQL that is starting up (57P03) says so and what to do, quoting PostgreSQL', async () => {
  await serveAgainstFakePostgres(
    refuseWith('57P03', 'the database system is starting up'),
    /^Failed to start: the PostgreSQL server in DATABASE_URL is not accepting connections now \(PostgreSQL: the database system is starting up\): start again once it is up$/m,
  );
});

test("serve on a PostgreSQL whose refusal has no advice of its own prints PostgreSQL's message and code (before: the error's JSON, without its message)", async () => {
  // 53300: too many connections, a dependency-down code without a message of the CLI's own.
  await serveAgainstFakePostgres(
    refuseWith('53300', 'sorry, too many clients already'),
    /^Failed to start: .*try again shortly \(sorry, too many clients already \[53300\]\)$/m,
  );
});
