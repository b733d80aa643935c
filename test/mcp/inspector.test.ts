import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT_DIR } from '../../src/config.ts';
import { createService, type Service } from '../../src/server.ts';
import { TOOL_NAMES } from '../../src/mcp/tool.ts';
import { testConfig } from '../helpers/env.ts';

const run = promisify(execFile);
/** The MCP Inspector (a pinned devDependency), in CLI mode: an MCP client none of us wrote. */
const INSPECTOR = path.join(ROOT_DIR, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

/** mcp-remote's test client (a pinned devDependency): connects as Claude Desktop's bridge does. */
const MCP_REMOTE = path.join(ROOT_DIR, 'node_modules', 'mcp-remote', 'dist', 'client.js');

let svc: Service;
let url: string;
let home: string;

function inspectorArgs(args: string[]): [string, string[], { env: NodeJS.ProcessEnv; timeout: number }] {
  return [
    process.execPath,
    [INSPECTOR, '--cli', url, '--transport', 'http', ...args],
    { env: { ...process.env, HOME: home, MCP_CATALOG_PATH: path.join(home, 'mcp.json'), NO_COLOR: '1' }, timeout: 60_000 },
  ];
}

async function inspector(...args: string[]): Promise<unknown> {
  const { stdout } = await run(...inspectorArgs(args));
  return JSON.parse(stdout);
}

/** Runs the Inspector CLI expecting it to fail; returns its exit code and its stdout + stderr. */
async function inspectorFails(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(...inspectorArgs(args));
    assert.fail(`the Inspector succeeded: ${stdout}${stderr}`);
  } catch (e) {
    const err = e as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof err.code !== 'number') throw e;
    return { code: err.code, output: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

before(async () => {
  home = mkdtempSync(path.join(tmpdir(), 'inspector-'));
  svc = await createService(testConfig());
  url = `${await svc.app.listen({ host: '127.0.0.1', port: 0 })}/mcp`;
});
after(async () => {
  await svc?.stop();
  rmSync(home, { recursive: true, force: true });
});

test('MCP Inspector CLI lists the six tools and calls get_signals against the running server', async () => {
  const list = (await inspector('--method', 'tools/list')) as { tools: { name: string }[] };
  assert.deepEqual(list.tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
  // Its schema-portability check prints nothing when clean (zod's `type: [X, "null"]` arrays
  // drew "Schema portability: 0 errors, 36 warnings across 6 tools").
  const strict = await run(...inspectorArgs(['--method', 'tools/list', '--strict']));
  assert.doesNotMatch(strict.stderr, /Schema portability|Warning|Error/i, strict.stderr);
  assert.equal((JSON.parse(strict.stdout) as { tools: unknown[] }).tools.length, TOOL_NAMES.length);

  const call = (await inspector('--method', 'tools/call', '--tool-name', 'get_signals', '--tool-arg', 'asset=bitcoin')) as {
    structuredContent: Record<string, unknown>;
    isError?: boolean;
  };
  assert.notEqual(call.isError, true);
  assert.deepEqual(call.structuredContent, svc.market.signal('bitcoin', false).value);
});

test('MCP Inspector CLI with a bad key prints the server message naming the invalid key, not an OAuth prompt', async () => {
  // Stdin and stderr are pipes here (no TTY): before the fix, the 401 made the Inspector start
  // OAuth and fail with "Interactive OAuth requires a TTY ...", never showing the reason.
  const bad = `svc_live_${'A'.repeat(38)}`; // well-formed, wrong checksum
  const { code, output } = await inspectorFails('--header', `Authorization: Bearer ${bad}`, '--method', 'tools/list');
  assert.notEqual(code, 0);
  assert.doesNotMatch(output, /OAuth|TTY/, output);
  assert.match(output, /Invalid API key svc_live_AAAA\.\.\.: checksum mismatch/, output);
  assert.match(output, /\/signin/, output);

  const unknown = (await inspectorFails('--header', 'Authorization: Bearer svc_live_nope', '--method', 'tools/list')).output;
  assert.match(unknown, /Invalid API key svc_live_nope\.\.\.: malformed/, unknown);
});

test('mcp-remote with a bad key prints the server message naming the invalid key, not an OAuth discovery error', async (t) => {
  if (!existsSync(MCP_REMOTE)) {
    console.log(`SKIPPED: mcp-remote is not installed at ${MCP_REMOTE} (npm ci installs it)`);
    t.skip('mcp-remote not installed');
    return;
  }
  const bad = `svc_live_${'A'.repeat(38)}`;
  // Before the fix, the 401 sent it into OAuth discovery ("ZodError ... authorization_endpoint").
  const res = await run(process.execPath, [MCP_REMOTE, url, '--header', `Authorization: Bearer ${bad}`, '--transport', 'http-only'], {
    env: { ...process.env, HOME: home, MCP_REMOTE_CONFIG_DIR: path.join(home, 'mcp-auth'), BROWSER: 'none' },
    timeout: 60_000,
  }).then(
    (r) => ({ code: 0, output: `${r.stdout}${r.stderr}` }),
    (e: { code?: unknown; stdout?: string; stderr?: string }) => ({ code: e.code, output: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
  assert.equal(typeof res.code, 'number', `mcp-remote did not exit by itself: ${res.output}`);
  assert.notEqual(res.code, 0, res.output);
  assert.match(res.output, /Invalid API key svc_live_AAAA\.\.\.: checksum mismatch/, res.output);
  assert.doesNotMatch(res.output, /authorization_endpoint|Authorization required|Please authorize/, res.output);
});
