import { spawn } from 'node:child_process';
import { ROOT_DIR } from '../../src/config.ts';

export { scriptNodeOptions } from '../../scripts/node-options.ts';

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
    let stopped = false;
    child.stdout.on('data', (d) => {
      stdout += d;
      // One SIGTERM, as a supervisor sends it (not one per later chunk of output).
      if (!stopped && opts.until?.test(stdout)) {
        stopped = true;
        child.kill('SIGTERM');
      }
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
