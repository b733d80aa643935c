#!/usr/bin/env node
// Runs every test/**/*.test.ts with Node's built-in test runner (through tsx), which ends
// with a summary CI reads ("# pass N", "# fail N"). Node 20 has no glob for --test, so the
// files are listed here. Extra arguments are passed to node (e.g. a file or --test-only).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
function find(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}
const args = process.argv.slice(2);
const files = args.some((a) => a.endsWith('.ts')) ? [] : find(path.join(root, 'test')).sort();
// A directory for this run's shared test fixtures (test/helpers/harness.ts: the PGlite template).
const cache = mkdtempSync(path.join(os.tmpdir(), 'market-intel-tests-'));
// --test-timeout bounds each test and each file (a file runs as one test in its own process):
// 10 minutes, so a hung test ends the run, while the browser suite (test/web/dashboard.test.ts,
// about 5 minutes on two busy cores) is not cut off on a loaded machine.
const res = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=tap', '--test-concurrency=2', '--test-timeout=600000', ...args, ...files],
  {
    stdio: 'inherit',
    cwd: root,
    env: { ...process.env, TEST_HARNESS_CACHE: cache },
  },
);
rmSync(cache, { recursive: true, force: true });
process.exit(res.status ?? 1);
