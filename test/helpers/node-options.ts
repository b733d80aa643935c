import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';

/**
 * The node options of package.json's script `name` (`start`, `cli`): the `--` tokens between
 * `node` and the script path, e.g. `['--liftoff-only']`, so tests start a command as
 * `npm start` / `npm run cli` does. Throws when the script does not exist.
 */
export function scriptNodeOptions(name: 'start' | 'cli'): string[] {
  const scripts = (JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const script = scripts[name];
  if (script === undefined) throw new Error(`package.json has no script ${name}`);
  const argv = script.split(/\s+/);
  const rest = argv.slice(argv.indexOf('node') + 1);
  const end = rest.findIndex((a) => !a.startsWith('-'));
  return end === -1 ? rest : rest.slice(0, end);
}

/** What a finished child process printed, and its exit code (null when killed). */
export interface NodeRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node <args>` (this Node) in the checkout with only `env` (plus PATH and LOG_LEVEL=info),
 * killed after `timeoutMs` (default 120 s). With `until`, the child is stopped (SIGTERM) once
 * its stdout matches, and the result is returned then.
 */
export function runNode(
  args: string[],
  env: Record<string, string> = {},
  opts: { timeoutMs?: number; until?: RegExp } = {},
): Promise<NodeRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT_DIR,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
      if (opts.until?.test(stdout)) child.kill('SIGTERM');
    });
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
