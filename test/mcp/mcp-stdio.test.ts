import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, CallToolResultSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { generateKey } from '../../src/auth/api-keys.ts';
import { ROOT_DIR } from '../../src/config.ts';
import { createService, type Service } from '../../src/server.ts';
import { openDatabase } from '../../src/store/db.ts';
import { TOOL_NAMES } from '../../src/mcp/tool.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';
import { scriptNodeOptions } from '../helpers/node-options.ts';

/**
 * Starts `npm run cli -- mcp --stdio` (the same command as the README) as a real child
 * process; `stderr()` is what it has written to stderr so far.
 */
async function stdioClient(env: Record<string, string>): Promise<Client & { stderr(): string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    // npm run cli's node options (--liftoff-only), then the sources through tsx.
    args: [...scriptNodeOptions('cli'), '--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), 'mcp', '--stdio'],
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: 'mcp-stdio-test', version: '1.0.0' });
  // `initialize` is answered before the core is built; the tools then wait for it (database,
  // dataset, backfill): allow more than the SDK's 60 s default on a loaded machine.
  await client.connect(transport, { timeout: 240_000 });
  return Object.assign(client, { stderr: () => err });
}

/** tools/list and tools/call wait for the core: the SDK's 60 s default is too short on a loaded machine. */
const SLOW = { timeout: 240_000 };

/** The client's opening messages: `initialize` (id 1) and `notifications/initialized`. */
const HANDSHAKE = [
  {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
  },
  { jsonrpc: '2.0', method: 'notifications/initialized' },
];

/**
 * `mcp --stdio` from the sources as its own process, on an in-memory database, warnings only on
 * stderr, with `env` added (e.g. MARKET_INTEL_API_KEY); stdin, stdout and stderr are pipes.
 */
function spawnStdio(env: Record<string, string> = {}) {
  return spawn(process.execPath, [...scriptNodeOptions('cli'), '--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), 'mcp', '--stdio'], {
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', PGLITE_DIR: 'memory://', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/**
 * Resolves when the stdio server (spawned with LOG_LEVEL info) logs its `database` start-up
 * phase on stderr. Listens to 'data', not through readline, whose close() would pause stderr
 * for `exchange`.
 */
function databaseOpened(child: ReturnType<typeof spawnStdio>): Promise<void> {
  return new Promise<void>((r) => {
    let text = '';
    child.stderr!.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('"phase":"database"')) r();
    });
  });
}

/**
 * Sends `messages` to a spawned stdio server as JSON lines, then ends stdin (unless
 * `keepOpen`: the exit is then the server's own), and resolves once it exits (killed after
 * `killAfterMs`, default 90 s: a safety kill; the code is then null): its exit code, its
 * stdout lines and its stderr.
 */
async function exchange(
  child: ReturnType<typeof spawnStdio>,
  messages: unknown[],
  keepOpen = false,
  killAfterMs = 90_000,
): Promise<{ code: number | null; out: string[]; err: string }> {
  const out: string[] = [];
  let err = '';
  createInterface({ input: child.stdout! }).on('line', (l) => out.push(l));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const text = messages.map((m) => JSON.stringify(m)).join('\n') + '\n';
  if (keepOpen) child.stdin!.write(text);
  else child.stdin!.end(text);
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  try {
    return { code: await exited, out, err };
  } finally {
    clearTimeout(timer);
    child.stdin!.destroy();
  }
}

function errorCode(r: CallToolResult): string {
  assert.equal(r.isError, true, JSON.stringify(r));
  const t = r.content[0];
  assert.ok(t && t.type === 'text');
  return JSON.parse(t.text).error.code;
}

describe('MCP over stdio, unauthenticated (embedded in-memory database)', () => {
  let svc: Service;
  let client: Client;
  before(async () => {
    svc = await createService(testConfig());
    await svc.app.ready();
    client = await stdioClient({ PGLITE_DIR: 'memory://' });
  });
  after(async () => {
    await client?.close();
    await svc?.stop();
  });

  test('lists exactly the six tools; get_signals equals the REST data; tier and key gates hold', async () => {
    const { tools } = await client.listTools(undefined, SLOW);
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
    // serverInfo's version is package.json's.
    const pkg = JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { version: string };
    assert.deepEqual(client.getServerVersion(), { name: 'market-intel', version: pkg.version });
    const r = (await client.callTool({ name: 'get_signals', arguments: { include_factors: true } })) as CallToolResult;
    assert.notEqual(r.isError, true);
    const rest = await svc.app.inject({ method: 'GET', url: '/api/v1/signals?include_factors=true' });
    assert.deepEqual(r.structuredContent, rest.json().data);
    const regime = (await client.callTool({ name: 'get_market_regime', arguments: {} })) as CallToolResult;
    assert.deepEqual(regime.structuredContent, svc.market.regime().value);
    assert.equal(
      errorCode((await client.callTool({ name: 'get_signal_history', arguments: { asset: 'btc' } })) as CallToolResult),
      'UNAUTHORIZED',
    );
    assert.equal(
      errorCode(
        (await client.callTool({
          name: 'get_thesis_health',
          arguments: { thesis_id: '00000000-0000-4000-8000-000000000000' },
        })) as CallToolResult,
      ),
      'UNAUTHORIZED',
    );
    // Malformed params: -32602 naming the field, as over HTTP (not the SDK's -32603).
    await assert.rejects(
      client.request({ method: 'tools/call', params: { name: 'get_signals', arguments: 'nope' } as never }, CallToolResultSchema, SLOW),
      (e: unknown) => {
        assert.ok(e instanceof McpError);
        assert.equal(e.code, ErrorCode.InvalidParams);
        assert.match(e.message, /Invalid tools\/call params: 'params\.arguments': /);
        return true;
      },
    );
    // The unauthenticated tier's minute runs out: the refusal says how to give this process a key.
    let limited: CallToolResult | undefined;
    for (let i = 0; i < 12 && !limited; i++) {
      const x = (await client.callTool({ name: 'get_assets', arguments: {} })) as CallToolResult;
      if (x.isError) limited = x;
    }
    assert.ok(limited, 'the unauthenticated minute limit is reached within 12 calls');
    assert.equal(errorCode(limited), 'RATE_LIMITED');
    assert.match(JSON.stringify(limited.content), /MCP over stdio: set MARKET_INTEL_API_KEY/);
  });
});

test('a line that is not one JSON-RPC message is answered (-32700 or -32600), not dropped; stdout holds only JSON-RPC', async () => {
  const child = spawnStdio();
  try {
    // Lines of stdout, each JSON-RPC, taken in order by `next` (at most 60 s each: the core loads meanwhile).
    const queue: string[] = [];
    let wake: (() => void) | null = null;
    createInterface({ input: child.stdout! }).on('line', (l) => {
      queue.push(l);
      wake?.();
    });
    const next = async () => {
      const deadline = Date.now() + 60_000;
      while (queue.length === 0) {
        assert.ok(Date.now() < deadline, 'no answer on stdout within 60 s');
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 1000);
        });
      }
      return JSON.parse(queue.shift()!) as { id: unknown; result?: unknown; error?: { code: number; message: string } };
    };
    const send = (line: string) => child.stdin!.write(`${line}\n`);
    send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    );
    assert.equal((await next()).id, 1);
    send('this is not json');
    const parse = await next();
    assert.deepEqual([parse.id, parse.error?.code], [null, -32700]);
    assert.match(parse.error!.message, /not valid JSON; send one JSON-RPC message per line/);
    send(
      JSON.stringify([
        { jsonrpc: '2.0', id: 2, method: 'ping' },
        { jsonrpc: '2.0', id: 3, method: 'ping' },
      ]),
    );
    const batch = await next();
    assert.deepEqual([batch.id, batch.error?.code], [null, -32600]);
    assert.match(batch.error!.message, /a batch is not accepted over stdio/);
    // A wrong envelope is answered with its id, so the client waiting on it is told.
    send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 7 }));
    const envelope = await next();
    assert.deepEqual([envelope.id, envelope.error?.code], [5, -32600]);
    assert.match(envelope.error!.message, /"method" must be a string/);
    // A member MCP does not define, or an id that is not an integer: -32600 with the id when usable.
    send(JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'ping', foo: 1 }));
    const extra = await next();
    assert.deepEqual([extra.id, extra.error?.code], [6, -32600]);
    assert.match(extra.error!.message, /unknown member "foo"/);
    send(JSON.stringify({ jsonrpc: '2.0', id: 1.5, method: 'ping' }));
    const fraction = await next();
    assert.deepEqual([fraction.id, fraction.error?.code], [null, -32600]);
    // A message over the HTTP body limit (the SDK's order of members: the id last) is refused
    // with its id, and the server goes on (past the SDK's own 10 MiB buffer it used to exit unanswered).
    send(
      JSON.stringify({
        method: 'tools/call',
        params: { name: 'get_signals', arguments: { asset: 'x'.repeat(11 * 1024 * 1024) } },
        jsonrpc: '2.0',
        id: 7,
      }),
    );
    const long = await next();
    assert.deepEqual([long.id, long.error?.code], [7, -32600]);
    assert.match(long.error!.message, /at most 1048576 bytes per message/);
    // A blank line is no message: nothing answers it, the next message is answered next.
    send('');
    // The server goes on: the next good message is answered.
    send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' }));
    assert.deepEqual(await next(), { jsonrpc: '2.0', id: 4, result: {} });
  } finally {
    child.stdin!.end();
    child.kill();
  }
});

test('requests piped in with stdin closed at once are all answered before the server exits (0)', async () => {
  // As `printf ... | npm run --silent cli -- mcp --stdio` sends them: stdin ends before the core
  // is up, so tools/list and tools/call are still waiting for it when it does.
  const { code, out } = await exchange(spawnStdio(), [
    ...HANDSHAKE,
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'get_assets', arguments: {} } },
    // An id used twice needs two answers; a cancelled request needs none (the SDK sends none).
    { jsonrpc: '2.0', id: 4, method: 'ping' },
    { jsonrpc: '2.0', id: 4, method: 'ping' },
    { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'get_regime', arguments: {} } },
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 5 } },
  ]);
  assert.equal(code, 0);
  const answers = out.map(
    (l) => JSON.parse(l) as { id: number; result?: { tools?: unknown[]; structuredContent?: { assets: unknown[] } } },
  );
  // Pings do not wait for the core: they may come before tools/list and tools/call.
  assert.deepEqual(answers.map((a) => a.id).sort(), [1, 2, 3, 4, 4]);
  assert.equal(answers.find((a) => a.id === 2)!.result!.tools!.length, 6);
  assert.ok(answers.find((a) => a.id === 3)!.result!.structuredContent!.assets.length > 0);
});

test('a value that is not an API key is refused naming the variable, not JWTs; the waiting requests are answered -32001 before the exit (1)', async () => {
  // A JWT where the key belongs: over HTTP the refusal talks of Authorization and JWTs; here
  // it names the environment variable and says how to get a key. stdin stays open: the exit
  // is the refusal's, and every request read before it gets the refusal, not a closed pipe.
  const jwtLike = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
  for (const value of [jwtLike, 'Bearer svc_live_abc']) {
    const { code, out, err } = await exchange(
      spawnStdio({ MARKET_INTEL_API_KEY: value }),
      [
        ...HANDSHAKE,
        { jsonrpc: '2.0', id: 2, method: 'tools/list' },
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'get_assets', arguments: {} } },
        // More answers than a pipe's buffer (64 KiB) holds: an exit without the drain cuts them off.
        ...Array.from({ length: 300 }, (_, i) => ({ jsonrpc: '2.0', id: 10 + i, method: 'tools/list' })),
      ],
      true,
    );
    assert.equal(code, 1, err);
    const answers = out.map((l) => JSON.parse(l) as { id: number; error?: { code: number; message: string; data: unknown } });
    assert.deepEqual(
      answers.map((a) => a.id).sort((x, y) => x - y),
      [1, 2, 3, ...Array.from({ length: 300 }, (_, i) => 10 + i)],
    );
    const reason = value === jwtLike ? 'wrong_credential' : 'malformed_header';
    for (const a of answers.filter((x) => x.id !== 1)) {
      assert.equal(a.error?.code, -32001, JSON.stringify(a));
      assert.deepEqual(a.error.data, { code: 'UNAUTHORIZED', reason });
      assert.match(
        a.error.message,
        /^MARKET_INTEL_API_KEY: the value is not an API key of this service .*sign in .*\/signin.*create a key/,
      );
      assert.doesNotMatch(a.error.message, /JWT|Authorization/);
      assert.ok(!a.error.message.includes(value), 'the value is not echoed');
    }
    assert.match(err, /MARKET_INTEL_API_KEY: the value is not an API key/);
  }
});

test('stdin ending with nothing asked still waits for the start-up: a refused key exits 1 with its reason, not 0', SLOW, async () => {
  // A stop by stdin's end does not abort the start-up as a signal does: the setup is checked.
  const { code, out, err } = await exchange(spawnStdio({ MARKET_INTEL_API_KEY: 'bogus' }), []);
  assert.equal(code, 1, err);
  assert.deepEqual(out, []);
  assert.match(err, /MARKET_INTEL_API_KEY: the value is not an API key of this service/);
  assert.doesNotMatch(err, /stopped during start-up/);
});

test('a failed start exits 1 with its reason on stderr even when stdin has already ended', SLOW, async () => {
  // As a script pipes its requests in: stdin ends at once, and the start fails after (the
  // embedded database is held by this process). A clean end (0, as before) told the script
  // that all went well.
  const dir = mkdtempSync(path.join(tmpdir(), 'mi-stdio-busy-'));
  const held = await openDatabase({ pgliteDir: dir });
  try {
    const { code, out, err } = await exchange(spawnStdio({ PGLITE_DIR: dir }), [
      ...HANDSHAKE,
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_assets', arguments: {} } },
    ]);
    assert.equal(code, 1, err);
    const call = out.map((l) => JSON.parse(l) as { id: number; error?: { message: string } }).find((a) => a.id === 2);
    assert.match(call?.error?.message ?? '', /is in use by process/, out.join('\n'));
    assert.match(err, new RegExp(`The embedded database ${dir} is in use by process ${process.pid}`));
  } finally {
    await held.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  'a PGLITE_DIR that cannot be created or used: the waiting requests get the reason, stderr says it once without a stack, exit 1',
  SLOW,
  async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mi-stdio-baddir-'));
    try {
      const file = path.join(dir, 'a-file');
      writeFileSync(file, 'x');
      const cases: [string, RegExp][] = [[file, /the embedded database folder is a regular file, not a folder/]];
      // procfs answers ENOENT to every mkdir: Node's recursive mkdir retried it for ever, the
      // process spun at 100 % CPU with its event loop blocked, and ignored SIGTERM.
      if (existsSync('/proc/self')) cases.push(['/proc/mi-stdio-nope', /the embedded database folder cannot be created \(ENOENT: /]);
      for (const [pgliteDir, said] of cases) {
        // stdin stays open: the exit is the server's own. 30 s is a safety kill, not a timing assertion.
        const { code, out, err } = await exchange(
          spawnStdio({ PGLITE_DIR: pgliteDir }),
          [...HANDSHAKE, { jsonrpc: '2.0', id: 2, method: 'tools/list' }],
          true,
          30_000,
        );
        assert.equal(code, 1, `${pgliteDir}: ${err}`);
        const answers = out.map((l) => JSON.parse(l) as { id: number; result?: unknown; error?: { code: number; message: string } });
        assert.ok(answers.find((a) => a.id === 1)?.result, 'initialize is answered');
        const list = answers.find((a) => a.id === 2);
        assert.equal(list?.error?.code, -32603, out.join('\n'));
        assert.match(list.error.message, new RegExp(`^PGLITE_DIR=${pgliteDir}: `));
        assert.match(list.error.message, said);
        // stderr: the one line of the reason (LOG_LEVEL=warn: no progress lines), no stack trace.
        const lines = err.trim().split('\n');
        assert.equal(lines.length, 1, err);
        assert.equal(lines[0], list.error.message);
        assert.match(lines[0]!, /: set PGLITE_DIR to a writable folder \(it is created when missing\), or DATABASE_URL to use PostgreSQL$/);
        assert.doesNotMatch(err, /\n\s+at |Failed to start/, 'no stack trace');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('SIGTERM while the core is still starting ends the process within SHUTDOWN_TIMEOUT_MS', SLOW, async () => {
  const child = spawnStdio({ SHUTDOWN_TIMEOUT_MS: '100' });
  // SIGTERM once `initialize` is answered: the core (modules, database, dataset) takes seconds more.
  const answeredInit = new Promise<void>((r) => createInterface({ input: child.stdout! }).once('line', () => r()));
  const run = exchange(child, HANDSHAKE, true, 30_000);
  await answeredInit;
  child.kill('SIGTERM');
  const { code, err } = await run;
  // The deadline is checked between start-up phases: met while the core is still starting, the
  // process exits 1 and says so; if the core was up by then, it is closed cleanly (exit 0),
  // not cut off mid-close.
  const timedOut =
    /SIGTERM: the stop did not finish in time \(the core was still starting or closing\): exiting now \(SHUTDOWN_TIMEOUT_MS\)/.test(err);
  assert.equal(code, timedOut ? 1 : 0, err);
  assert.doesNotMatch(err, /closing the core did not finish in time/);
});

test(
  'SIGTERM while the core is still starting ends the start-up at its next phase: exit 0, no full start, and the database opens cleanly after',
  SLOW,
  async () => {
    // An MCP client that gives up on a first start (SIGTERM, then SIGKILL a few seconds later)
    // used to wait for the whole start-up (database, import, series, backfill) before the stop.
    const dir = mkdtempSync(path.join(tmpdir(), 'mi-stdio-stop-'));
    const pgliteDir = path.join(dir, 'pglite');
    try {
      const child = spawnStdio({ PGLITE_DIR: pgliteDir, LOG_LEVEL: 'info' });
      // SIGTERM once the database is open: the import and the series follow.
      const databaseOpen = databaseOpened(child);
      const run = exchange(child, HANDSHAKE, true, 60_000);
      await databaseOpen;
      child.kill('SIGTERM');
      const { code, err } = await run;
      assert.equal(code, 0, err);
      assert.match(err, /MCP stdio: stopped during start-up \(the database was closed cleanly\)/);
      assert.doesNotMatch(err, /"phase":"backfill"|MCP stdio server ready/, 'the start-up did not run to its end');
      // The folder it left is a sound database: the next start uses it and answers a tool call.
      const again = await exchange(spawnStdio({ PGLITE_DIR: pgliteDir }), [
        ...HANDSHAKE,
        { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_assets', arguments: {} } },
      ]);
      assert.equal(again.code, 0, again.err);
      const call = again.out.map((l) => JSON.parse(l) as { id: number; result?: { isError?: boolean } }).find((a) => a.id === 2);
      assert.ok(call?.result && !call.result.isError, again.out.join('\n'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'one Ctrl+C that arrives twice (from the terminal and forwarded by npm) stops the start-up cleanly (exit 0), not as a second Ctrl+C',
  SLOW,
  async () => {
    const child = spawnStdio({ LOG_LEVEL: 'info' });
    const databaseOpen = databaseOpened(child);
    const run = exchange(child, HANDSHAKE, true, 60_000);
    await databaseOpen;
    child.kill('SIGINT');
    // npm forwards its own a few milliseconds later (two sent at once would be merged by the kernel).
    await new Promise((r) => setTimeout(r, 50));
    child.kill('SIGINT');
    const { code, err } = await run;
    assert.equal(code, 0, err);
    assert.match(err, /MCP stdio: stopped during start-up \(the database was closed cleanly\)/);
  },
);

describe('MCP over stdio with an API key (shared PostgreSQL)', async () => {
  const pgUp = await postgresAvailable();
  let idp: TestIdp;
  let svc: Service;
  let db: { url: string; drop: () => Promise<void> };
  let proKey = '';
  let thesisId = '';
  let jwt = '';

  before(async () => {
    if (!pgUp) return;
    db = await createTempPgDatabase();
    idp = await startTestIdp();
    svc = await createService(testConfig({ DATABASE_URL: db.url, AUTH_ISSUER: idp.issuer }));
    await svc.app.ready();
    jwt = await idp.token('stdio-user', { email: 'stdio@example.com' });
    const k = await svc.app.inject({
      method: 'POST',
      url: '/api/v1/keys/create',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      payload: '{}',
    });
    proKey = k.json().data.key;
    await svc.keys.setTier('stdio@example.com', 'pro');
    const t = await svc.app.inject({
      method: 'POST',
      url: '/api/v1/thesis',
      headers: { authorization: `Bearer ${proKey}`, 'content-type': 'application/json' },
      payload: JSON.stringify({
        asset: 'solana',
        direction: 'short',
        title: 'SOL fades',
        conditions: [{ metric: 'regime', operator: 'eq', value: 'bull', kind: 'invalidation' }],
      }),
    });
    assert.equal(t.statusCode, 201, t.body);
    thesisId = t.json().data.id;
  });
  after(async () => {
    await svc?.stop();
    await idp?.close();
    await db?.drop();
  });

  test(
    'the key from MARKET_INTEL_API_KEY identifies the user: thesis health and history work',
    {
      skip: pgUp ? false : PG_SKIP,
    },
    async () => {
      const client = await stdioClient({ DATABASE_URL: db.url, AUTH_ISSUER: idp.issuer, MARKET_INTEL_API_KEY: proKey });
      try {
        const h = (await client.callTool(
          { name: 'get_thesis_health', arguments: { thesis_id: thesisId } },
          undefined,
          SLOW,
        )) as CallToolResult;
        assert.notEqual(h.isError, true, JSON.stringify(h.content));
        const rest = await svc.app.inject({
          method: 'GET',
          url: `/api/v1/thesis/${thesisId}/health`,
          headers: { authorization: `Bearer ${proKey}` },
        });
        assert.deepEqual({ ...(h.structuredContent as object), evaluated_at: null }, { ...rest.json().data, evaluated_at: null });
        const hist = (await client.callTool({ name: 'get_signal_history', arguments: { asset: 'solana', days: 90 } })) as CallToolResult;
        assert.notEqual(hist.isError, true);
        assert.deepEqual(hist.structuredContent, (await svc.market.signalHistory('solana', 90, 50)).value);
        // A tier change made elsewhere counts on the next call, and so does a revocation.
        await svc.keys.setTier('stdio@example.com', 'free');
        assert.equal(
          errorCode((await client.callTool({ name: 'get_signal_history', arguments: { asset: 'solana' } })) as CallToolResult),
          'TIER_REQUIRED',
        );
        const list = await svc.app.inject({ method: 'GET', url: '/api/v1/keys', headers: { authorization: `Bearer ${jwt}` } });
        const keyId = list.json().data.keys[0].id;
        const rv = await svc.app.inject({
          method: 'POST',
          url: '/api/v1/keys/revoke',
          headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
          payload: JSON.stringify({ key_id: keyId }),
        });
        assert.equal(rv.statusCode, 200);
        assert.equal(errorCode((await client.callTool({ name: 'get_assets', arguments: {} })) as CallToolResult), 'UNAUTHORIZED');
      } finally {
        await client.close();
      }
    },
  );

  test('an invalid key stops the stdio server before any tool answers, naming the variable', { skip: pgUp ? false : PG_SKIP }, async () => {
    // `initialize` is answered at once; the key is checked when the core is ready, and the
    // process exits then, once the waiting request has the refusal as MCP over HTTP words it
    // (-32001, data {code, reason}; not the SDK's -32603, nor a closed connection).
    const client = await stdioClient({ DATABASE_URL: db.url, AUTH_ISSUER: idp.issuer, MARKET_INTEL_API_KEY: 'svc_live_bogus' });
    try {
      await assert.rejects(client.listTools(undefined, SLOW), (err: { code?: unknown; message?: string; data?: unknown }) => {
        assert.equal(err.code, -32001, String(err));
        assert.deepEqual(err.data, { code: 'UNAUTHORIZED', reason: 'malformed' });
        assert.match(err.message ?? '', /MARKET_INTEL_API_KEY: Invalid API key svc_live_bogu\.\.\.: malformed/);
        return true;
      });
      // The closed stdout may be seen before the last of stderr has been read.
      for (let i = 0; i < 50 && !/MARKET_INTEL_API_KEY: /.test(client.stderr()); i++) await new Promise((r) => setTimeout(r, 100));
      assert.match(client.stderr(), /MARKET_INTEL_API_KEY: /);
    } finally {
      await client.close();
    }
    // A well-formed key this database does not hold (one from a service on another database):
    // the message says which database was asked.
    const elsewhere = await stdioClient({ DATABASE_URL: db.url, AUTH_ISSUER: idp.issuer, MARKET_INTEL_API_KEY: generateKey().key });
    try {
      await assert.rejects(elsewhere.listTools(undefined, SLOW), (err: { code?: unknown; message?: string; data?: unknown }) => {
        assert.equal(err.code, -32001, String(err));
        assert.deepEqual(err.data, { code: 'UNAUTHORIZED', reason: 'unknown' });
        assert.match(err.message ?? '', /looked up in the database at DATABASE_URL/);
        return true;
      });
      for (let i = 0; i < 50 && !/same PGLITE_DIR or DATABASE_URL/.test(elsewhere.stderr()); i++)
        await new Promise((r) => setTimeout(r, 100));
      assert.match(
        elsewhere.stderr(),
        /MARKET_INTEL_API_KEY: Invalid API key svc_live_.{4}\.\.\.: no such key.*looked up in the database at DATABASE_URL/,
      );
    } finally {
      await elsewhere.close();
    }
  });
});
