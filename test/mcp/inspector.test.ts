import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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

let svc: Service;
let url: string;
let home: string;

async function inspector(...args: string[]): Promise<unknown> {
  const { stdout } = await run(process.execPath, [INSPECTOR, '--cli', url, '--transport', 'http', ...args], {
    env: { ...process.env, HOME: home, MCP_CATALOG_PATH: path.join(home, 'mcp.json'), NO_COLOR: '1' },
    timeout: 60_000,
  });
  return JSON.parse(stdout);
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

  const call = (await inspector('--method', 'tools/call', '--tool-name', 'get_signals', '--tool-arg', 'asset=bitcoin')) as {
    structuredContent: Record<string, unknown>;
    isError?: boolean;
  };
  assert.notEqual(call.isError, true);
  assert.deepEqual(call.structuredContent, svc.market.signal('bitcoin', false).value);
});
