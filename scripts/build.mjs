#!/usr/bin/env node
// The production build: src/ compiled to dist/ (tsc -p tsconfig.build.json, JavaScript with
// the `.ts` imports rewritten to `.js`), then the embedded database's template (a migrated
// PGlite data directory, dist/pglite-template-<hash>.tar.gz) that a first start loads instead
// of running initdb. Run by `prepare` (npm install / npm ci) and, with --if-stale, before
// `npm start`, `npm run start:live` and `npm run cli`: then it compiles only when a file in
// src/ (or a tsconfig, or package.json) is newer than the last build, so `npm start` never
// runs stale code, and checks the template in a few milliseconds otherwise.
// Everything it prints goes to stderr: stdout may carry the MCP protocol (`npm run cli -- mcp --stdio`).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dist = path.join(root, 'dist');
const stamp = path.join(dist, '.build-stamp');
const ifStale = process.argv.includes('--if-stale');
const say = (msg) => process.stderr.write(`build: ${msg}\n`);

/** The newest modification time (ms) of the build's inputs. */
function newestInput() {
  let newest = 0;
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  walk(path.join(root, 'src'));
  for (const f of ['tsconfig.json', 'tsconfig.build.json', 'package.json']) newest = Math.max(newest, statSync(path.join(root, f)).mtimeMs);
  return newest;
}

const stale = !existsSync(stamp) || statSync(stamp).mtimeMs < newestInput();
let tsc = null;
if (stale || !ifStale) {
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    // An install without the dev dependencies (npm ci --omit=dev) runs `prepare` too: it must not fail.
    if (!ifStale)
      say('TypeScript is not installed (--omit=dev?): dist/ not built; build it where the dev dependencies are (npm run build)');
    else if (existsSync(path.join(dist, 'cli.js'))) say('TypeScript is not installed: running dist/ as it is');
    else {
      say('TypeScript is not installed and dist/ is missing: run `npm install` (with the dev dependencies) to build it');
      process.exit(1);
    }
  }
}
if (tsc) {
  const t0 = performance.now();
  const startedAt = Date.now();
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: ['ignore', 2, 2] });
  if (r.status !== 0) {
    say('tsc failed: dist/ is not up to date');
    process.exit(r.status ?? 1);
  }
  // Dated when the compile began: a file saved during it makes the next --if-stale compile again.
  writeFileSync(stamp, `${new Date(startedAt).toISOString()}\n`);
  utimesSync(stamp, new Date(startedAt), new Date(startedAt));
  say(`compiled src/ to dist/ in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

// Not recompiled: the migrations and PGlite's version are as at the last build, so its template
// stands unless it was deleted.
if (!existsSync(path.join(dist, 'store', 'db.js'))) process.exit(0);
if (!stale && ifStale && readdirSync(dist).some((n) => /^pglite-template-[0-9a-f]+\.tar\.gz$/.test(n))) process.exit(0);
const t1 = performance.now();
const { ensurePgliteTemplate } = await import(path.join(dist, 'store', 'db.js'));
const tpl = await ensurePgliteTemplate();
if (tpl.made)
  say(`made the embedded database's template ${path.relative(root, tpl.file)} in ${((performance.now() - t1) / 1000).toFixed(1)} s`);
