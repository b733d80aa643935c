import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import madge from 'madge';
import { ROOT_DIR } from '../../src/config.ts';

/**
 * The import rule of docs/architecture.md, checked on the real import graph of src/ (madge,
 * type-only and dynamic imports included): engine <- providers/store <- services <- http/mcp (<- web);
 * only the wiring files (core.ts, server.ts, cli.ts) know everything; no import cycles; no
 * framework (Fastify, the MCP SDK) below the edges.
 */

const SRC = path.join(ROOT_DIR, 'src');
const WIRING = new Set(['core.ts', 'server.ts', 'cli.ts']);

/** The area of a file: its first folder under src/, or the file name for files at the top. */
function area(file: string): string {
  return file.includes('/') ? file.split('/')[0]! : file;
}

/** Which areas each area may import (besides itself). Specific files are allowed with their path. */
const ALLOWED: Record<string, readonly string[]> = {
  'errors.ts': [],
  'config.ts': [],
  'logger.ts': ['config.ts'],
  engine: [],
  providers: ['engine', 'errors.ts', 'config.ts'],
  store: ['engine', 'config.ts', 'errors.ts', 'auth/tiers.ts'],
  'rate-limit': ['auth/tiers.ts', 'engine/util.ts'],
  auth: ['store', 'config.ts', 'errors.ts'],
  services: ['engine', 'providers', 'store', 'auth', 'rate-limit', 'errors.ts', 'config.ts'],
  jobs: ['providers', 'services', 'store', 'engine', 'errors.ts'],
  http: ['services', 'auth', 'rate-limit', 'errors.ts', 'config.ts', 'engine'],
  mcp: ['services', 'rate-limit', 'errors.ts', 'engine'],
  admin: ['auth/tiers.ts'],
  web: ['http', 'services', 'auth', 'rate-limit', 'errors.ts', 'config.ts', 'engine'],
};

/** Packages only the edges (http/, mcp/, web/) and the wiring files may import. */
const EDGE_PACKAGES = /^(fastify|@fastify\/|fastify-|@modelcontextprotocol\/)/;

let graph: Record<string, string[]> | undefined;
let cycles: string[][] = [];
async function load(): Promise<Record<string, string[]>> {
  if (!graph) {
    const res = await madge(SRC, {
      fileExtensions: ['ts'],
      tsConfig: path.join(ROOT_DIR, 'tsconfig.json'),
      detectiveOptions: { ts: { skipTypeImports: false, skipAsyncImports: false }, es6: { skipAsyncImports: false } },
    });
    graph = res.obj();
    cycles = res.circular();
  }
  return graph!;
}

test('the import graph covers every source file', async () => {
  const g = await load();
  assert.ok(Object.keys(g).length >= 50, `madge found ${Object.keys(g).length} files`);
  for (const f of ['core.ts', 'services/access.ts', 'http/app.ts', 'mcp/server.ts', 'engine/signal.ts'])
    assert.ok(g[f], `${f} is in the graph`);
  // The checker sees imports: the wiring file imports the core, the core the services.
  assert.ok(g['cli.ts']!.includes('core.ts'));
  assert.ok(g['core.ts']!.includes('services/access.ts'));
});

test('imports point one way: engine <- providers/store <- services <- http/mcp; only core, server and cli wire', async () => {
  const g = await load();
  const bad: string[] = [];
  for (const [file, deps] of Object.entries(g)) {
    if (WIRING.has(file)) continue;
    const from = area(file);
    const allowed = ALLOWED[from];
    assert.ok(allowed, `no rule for ${file}: add its area to ALLOWED and to docs/architecture.md`);
    for (const dep of deps) {
      const to = area(dep);
      if (to === from || allowed.includes(to) || allowed.includes(dep)) continue;
      bad.push(`${file} -> ${dep}`);
    }
  }
  assert.deepEqual(bad, [], `forbidden imports (see docs/architecture.md, "The import rule"):\n${bad.join('\n')}`);
});

test('no import cycle between files', async () => {
  await load();
  assert.deepEqual(cycles, [], `import cycles:\n${cycles.map((c) => c.join(' -> ')).join('\n')}`);
});

test('no framework below the edges: only http/, mcp/, web/ and the wiring files import Fastify or the MCP SDK', async () => {
  const g = await load();
  const bad: string[] = [];
  for (const file of Object.keys(g)) {
    const a = area(file);
    if (a === 'http' || a === 'mcp' || a === 'web' || WIRING.has(file)) continue;
    const text = readFileSync(path.join(SRC, file), 'utf8');
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*)['"]([^'"]+)['"]/g)) {
      if (EDGE_PACKAGES.test(m[1]!)) bad.push(`${file} imports ${m[1]}`);
    }
  }
  assert.deepEqual(bad, []);
});
