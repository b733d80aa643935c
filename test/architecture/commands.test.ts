import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ROOT_DIR } from '../../src/config.ts';
import { openDatabase } from '../../src/store/db.ts';
import { UserRepo } from '../../src/store/user-repo.ts';
import { freePort } from '../helpers/faults.ts';
import { type NodeRun, runNode } from '../helpers/node-options.ts';

/**
 * `mcp --stdio`, `backfill` and `users set-tier` are built on createCore only: they never load
 * the HTTP stack. Each runs as a real child process with a resolve hook that fails the import
 * of Fastify (and of the MCP SDK and the identity provider where they have no business).
 */

const HOOK = path.join(ROOT_DIR, 'test', 'helpers', 'forbid-modules.mjs');
const HTTP_STACK = ['fastify', '@fastify/swagger', '@fastify/swagger-ui', 'fastify-type-provider-zod', 'better-auth'];
const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** Runs the CLI through tsx with the forbid-modules hook and only `env` (plus PATH); see runNode. */
function cli(args: string[], env: Record<string, string>): Promise<NodeRun> {
  return runNode(['--import', 'tsx', '--import', HOOK, path.join(ROOT_DIR, 'src', 'cli.ts'), ...args], env);
}

test('the hook works: a command that needs Fastify fails when Fastify is forbidden', async () => {
  const r = await cli(['serve', '--port', '0'], { PGLITE_DIR: 'memory://', FORBID_MODULES: 'fastify' });
  assert.notEqual(r.code, 0);
  assert.match(r.stdout + r.stderr, /FORBIDDEN MODULE fastify/);
});

test('backfill runs without loading Fastify, the identity provider or the MCP SDK', async () => {
  const r = await cli(['backfill'], { PGLITE_DIR: 'memory://', FORBID_MODULES: [...HTTP_STACK, '@modelcontextprotocol/sdk'].join(',') });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /signal history backfill/);
});

test('backtest runs without a database, Fastify, the identity provider or the MCP SDK, and prints the walk-forward report as JSON', async () => {
  const r = await cli(['backtest', '--walk-forward', '--from', '2024-01-01', '--json'], {
    FORBID_MODULES: [...HTTP_STACK, '@modelcontextprotocol/sdk', '@electric-sql/pglite', 'pg'].join(','),
  });
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(report.mode, 'walk_forward');
  assert.equal(report.model_version, 'signals-v4');
  assert.deepEqual(
    report.choices.map((c: { year: number }) => c.year),
    [2024, 2025],
  );
  assert.equal(report.assets.length, 11);
});

test('users set-tier runs without loading Fastify, the identity provider or the MCP SDK', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mi-cli-'));
  tmp.push(dir);
  const pgliteDir = path.join(dir, 'pglite');
  const db = await openDatabase({ pgliteDir });
  await new UserRepo(db.db).ensureUser('user-1', 'dora@example.com');
  await db.close();
  const r = await cli(['users', 'set-tier', 'dora@example.com', 'pro'], {
    PGLITE_DIR: pgliteDir,
    FORBID_MODULES: [...HTTP_STACK, '@modelcontextprotocol/sdk'].join(','),
  });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /dora@example\.com: tier set to pro/);
  const again = await openDatabase({ pgliteDir });
  assert.equal(await new UserRepo(again.db).userTier('user-1'), 'pro');
  await again.close();
});

test('serve becomes ready without the MCP SDK or better-auth: the SDK is loaded by the first /mcp request, the identity provider after listening', async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', HOOK, path.join(ROOT_DIR, 'src', 'cli.ts'), 'serve'], {
    cwd: ROOT_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      PGLITE_DIR: 'memory://',
      PORT: String(port),
      AUTH_SECRET: 'commands-test-secret-0123456789abcdef',
      // better-auth/plugins: imported only by src/auth/identity.ts (the provider itself);
      // jose: by the JWT verifier (src/auth/jwt.ts), made on the first token, and by better-auth.
      FORBID_MODULES: '@modelcontextprotocol/sdk,better-auth/plugins,jose',
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const base = `http://127.0.0.1:${port}`;
  try {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ok = await fetch(`${base}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      assert.ok(Date.now() < deadline && child.exitCode === null, `serve did not become ready: ${out.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const rest = await fetch(`${base}/api/v1/signals`);
    assert.equal(rest.status, 200);
    assert.doesNotMatch(out, /FORBIDDEN MODULE @modelcontextprotocol/, 'nothing asked for the MCP SDK before the first /mcp request');
    // The identity provider was asked for only once the service listened, and its failure leaves the service up:
    // identity requests answer in the envelope, 500 here (a broken install, not the database: that would be 503).
    // The child's log is written asynchronously: wait for the line (at most 10 s).
    for (const end = Date.now() + 10_000; !out.includes('start-up: listening') && Date.now() < end;)
      await new Promise((r) => setTimeout(r, 50));
    const listening = out.indexOf('start-up: listening');
    assert.ok(listening > 0, out.slice(-2000));
    const forbidden = out.indexOf('FORBIDDEN MODULE better-auth/plugins');
    if (forbidden !== -1) assert.ok(forbidden > listening, 'better-auth is not loaded before the service listens');
    const jose = out.indexOf('FORBIDDEN MODULE jose');
    if (jose !== -1) assert.ok(jose > listening, 'JOSE is not loaded before the service listens');
    const signUp = await fetch(`${base}/auth/sign-up/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: base },
      body: JSON.stringify({ name: 'A', email: 'a@example.com', password: 'correct horse battery staple 42' }),
    });
    assert.equal(signUp.status, 500);
    assert.equal(((await signUp.json()) as { error: { code: string } }).error.code, 'INTERNAL_ERROR');
    assert.match(out, /identity provider could not be created/);
    // The first /mcp request imports the SDK: here the hook refuses it, so the request fails and says which import.
    const mcp = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    assert.equal(mcp.status, 500);
    const sdk = /FORBIDDEN MODULE @modelcontextprotocol\/sdk\/server\/webStandardStreamableHttp\.js/;
    for (const end = Date.now() + 10_000; !sdk.test(out) && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
    assert.match(out, /FORBIDDEN MODULE @modelcontextprotocol\/sdk\/server\/webStandardStreamableHttp\.js/);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('close', r));
  }
});

test('mcp --stdio serves tools without loading Fastify or the identity provider', async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--import', 'tsx', '--import', HOOK, path.join(ROOT_DIR, 'src', 'cli.ts'), 'mcp', '--stdio'],
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', PGLITE_DIR: 'memory://', FORBID_MODULES: HTTP_STACK.join(',') },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'commands-test', version: '1.0.0' });
  // `initialize` is answered at once; tools/list waits for the core (database, dataset,
  // backfill): allow more than the SDK's 60 s default on a loaded machine.
  await client.connect(transport, { timeout: 240_000 });
  try {
    const { tools } = await client.listTools(undefined, { timeout: 240_000 });
    assert.equal(tools.length, 6);
    const r = await client.callTool({ name: 'get_assets', arguments: {} });
    assert.notEqual(r.isError, true);
  } finally {
    await client.close();
  }
});

test('SIGTERM to `npm start` stops the service itself (the script execs node): it logs the shutdown and frees its port', async () => {
  const port = await freePort();
  const npm = spawn('npm', ['start'], {
    cwd: ROOT_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      LOG_LEVEL: 'info',
      PGLITE_DIR: 'memory://',
      PORT: String(port),
      HOST: '127.0.0.1',
    },
  });
  let out = '';
  npm.stdout.on('data', (d) => (out += d));
  npm.stderr.on('data', (d) => (out += d));
  const deadline = Date.now() + 120_000;
  while (!/listening at/.test(out)) {
    assert.ok(Date.now() < deadline && npm.exitCode === null, `npm start did not listen:\n${out.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  const exited = new Promise((r) => npm.on('exit', r));
  npm.kill('SIGTERM');
  await exited;
  // The service's own shutdown ran (not only npm's), and nothing answers on its port any more.
  const stopBy = Date.now() + 15_000;
  let up = true;
  while (up && Date.now() < stopBy) {
    up = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      () => true,
      () => false,
    );
    if (up) await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(up, false, 'the service still answers after SIGTERM to npm');
  assert.match(out, /shutting down/);
});
