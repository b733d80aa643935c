import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { ROOT_DIR } from '../../src/config.ts';
import { type NodeRun, runNode } from './node-options.ts';

/** The command line's test files (test/cli*.test.ts): temporary folders and the CLI as a child process. */

const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** A new temporary folder, removed after the test file. */
export function tmpDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'mi-cli-'));
  tmp.push(d);
  return d;
}

/** Removes `d` after the test file, like the folders of tmpDir. */
export function removeAfter(d: string): void {
  tmp.push(d);
}

/** Runs the CLI (src/cli.ts through tsx) with `args` and only `env` (plus PATH); see runNode. */
export function cli(args: string[], env: Record<string, string> = {}, opts: { timeoutMs?: number; until?: RegExp } = {}): Promise<NodeRun> {
  return runNode(['--import', 'tsx', path.join(ROOT_DIR, 'src', 'cli.ts'), ...args], env, opts);
}
