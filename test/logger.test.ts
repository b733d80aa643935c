// The process logger (src/logger.ts): with `{ sync: false }` (how `serve` logs) lines are
// buffered, and pino must still write every one of them, in order, when the process exits in
// the same tick as the last one; the default (one-shot commands) writes each line at once, in
// order with the command's own stdout output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT_DIR } from '../src/config.ts';

const LINES = 5000;

/** Runs `body` in a child process (through tsx) with `createLogger` imported; returns its stdout lines. */
function runChild(body: string): string[] {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'logger-test-'));
  try {
    const script = path.join(dir, 'child.ts');
    writeFileSync(script, `import { createLogger } from ${JSON.stringify(path.join(ROOT_DIR, 'src', 'logger.ts'))};\n${body}\n`);
    const r = spawnSync(process.execPath, ['--import', 'tsx', script], {
      cwd: ROOT_DIR,
      encoding: 'utf8',
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split('\n').filter((l) => l !== '');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("serve's asynchronous log: every line is written, in order, when the process exits right after it", () => {
  const lines = runChild(
    `const log = createLogger('info', undefined, { sync: false });\n` +
      `for (let i = 0; i < ${LINES}; i++) log.info({ i }, 'line');\n` +
      // Exit in the same tick: nothing has had a turn of the event loop to be written.
      `process.exit(0);`,
  );
  assert.equal(lines.length, LINES);
  lines.forEach((l, i) => assert.equal((JSON.parse(l) as { i: number }).i, i));
});

test("the default synchronous log stays in order with the command's own stdout output", () => {
  const lines = runChild(
    `const log = createLogger('info');\n` +
      `for (let i = 0; i < 50; i++) { log.info({ i }, 'line'); process.stdout.write(JSON.stringify({ out: i }) + '\\n'); }`,
  );
  assert.equal(lines.length, 100);
  lines.forEach((l, j) => {
    const o = JSON.parse(l) as { i?: number; out?: number };
    if (j % 2 === 0) assert.equal(o.i, j / 2, `line ${j}: ${l}`);
    else assert.equal(o.out, (j - 1) / 2, `line ${j}: ${l}`);
  });
});
