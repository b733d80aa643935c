// Part of `npm run bench` (bench/run.ts), and runnable alone (`npx tsx bench/startup.ts`):
// the service's start-up, issue #13 item 6. Each figure is one real process:
//  1. first start: `serve` on a fresh embedded database (PGLITE_DIR that does not exist yet),
//     wall-clock time from spawn to the first 200 on GET /readyz, and the process's peak RSS
//     (VmHWM from /proc/<pid>/status, read just before it is stopped);
//  2. warm start: the same again on the database the first start left (three runs, median);
//  3. stdio MCP: `mcp --stdio` on that database, driven by the MCP SDK's own stdio client: the
//     time from spawn to the answer of `initialize`, then to the first tools/call get_signals,
//     and the peak RSS.
// Targets (issue #13): first start < 8 s, warm start < 3 s, peak RSS < 512 MB in every run,
// stdio `initialize` < 3 s warm, on an idle machine. The load average is printed with every
// figure, since the machine may be shared. STARTUP_COMMAND (e.g. `node --import tsx
// src/cli.ts`) measures another command line, and STARTUP_ROOT another checkout, for a
// before/after comparison in the same run.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ROOT_DIR } from '../src/config.ts';
import { scriptNodeOptions } from '../scripts/node-options.ts';
import { freePort } from './harness.ts';

/** One start: time to the first 200 on /readyz (or to `initialize`), ms; peak RSS, MB; the 1-minute load average when it ended. */
export interface StartFigure {
  ms: number;
  /** CPU time (user + system) the process had used by then, ms: less sensitive than `ms` to other load on the machine. */
  cpuMs: number;
  peakRssMb: number;
  load1: number;
}

/** The figures of one benchStartup() run. */
export interface StartupFigures {
  /** The command measured (argv before `serve` / `mcp --stdio`). */
  command: string[];
  first: StartFigure;
  warm: StartFigure[];
  /** Median of the warm starts' times, ms. */
  warmMedianMs: number;
  /** stdio MCP: `initialize` answered (ms), and the first tools/call get_signals answered (ms from spawn). */
  stdio: StartFigure & { firstCallMs: number };
}

/** The peak resident set size of a process, MB (VmHWM), or NaN when it cannot be read. */
function peakRssMb(pid: number | undefined | null): number {
  if (!pid) return NaN;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** User + system CPU time a process has used, ms (/proc/<pid>/stat, in clock ticks of 10 ms), or NaN. */
function cpuMs(pid: number | undefined | null): number {
  if (!pid) return NaN;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

const load1 = () => Number(loadavg()[0]!.toFixed(2));

/** The command line measured: STARTUP_COMMAND, or the production command (`node dist/cli.js`). */
function defaultCommand(root: string): string[] {
  const env = process.env.STARTUP_COMMAND;
  if (env) return env.split(' ').filter(Boolean);
  return [process.execPath, path.join(root, 'dist', 'cli.js')];
}

/** Starts `serve` on PGLITE_DIR=`dir` and measures it until /readyz answers 200 (limit 120 s). */
async function serveOnce(command: string[], root: string, dir: string): Promise<StartFigure> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = spawn(command[0]!, [...command.slice(1), 'serve'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', PGLITE_DIR: dir, LOG_LEVEL: 'warn', LIVE: '0' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let exited = false;
  proc.on('exit', () => (exited = true));
  try {
    for (;;) {
      if (exited) throw new Error(`${command.join(' ')} serve exited with ${proc.exitCode}`);
      if (performance.now() - t0 > 120_000) throw new Error('no 200 on /readyz within 120 s');
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) })
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    return { ms: Math.round(performance.now() - t0), cpuMs: cpuMs(proc.pid), peakRssMb: Math.round(peakRssMb(proc.pid)), load1: load1() };
  } finally {
    if (!exited) {
      const done = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await Promise.race([done, new Promise((r) => setTimeout(r, 10_000))]);
      if (!exited) proc.kill('SIGKILL');
    }
  }
}

/** Starts `mcp --stdio` on PGLITE_DIR=`dir` with the SDK's stdio client: time to `initialize`, then to the first tools/call. */
async function stdioOnce(command: string[], root: string, dir: string): Promise<StartFigure & { firstCallMs: number }> {
  const transport = new StdioClientTransport({
    command: command[0]!,
    args: [...command.slice(1), 'mcp', '--stdio'],
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PGLITE_DIR: dir, LOG_LEVEL: 'warn' },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'bench-startup', version: '1.0.0' });
  const t0 = performance.now();
  try {
    await client.connect(transport, { timeout: 120_000 });
    const ms = Math.round(performance.now() - t0);
    const initCpuMs = cpuMs(transport.pid);
    const r = await client.callTool({ name: 'get_signals', arguments: {} }, undefined, { timeout: 120_000 });
    if (r.isError) throw new Error(`get_signals failed: ${JSON.stringify(r.content)}`);
    const firstCallMs = Math.round(performance.now() - t0);
    return { ms, cpuMs: initCpuMs, firstCallMs, peakRssMb: Math.round(peakRssMb(transport.pid)), load1: load1() };
  } finally {
    await client.close().catch(() => {});
  }
}

const fmt = (f: StartFigure) =>
  `${(f.ms / 1000).toFixed(2)} s (CPU ${(f.cpuMs / 1000).toFixed(2)} s), peak RSS ${f.peakRssMb} MB (load ${f.load1})`;

/**
 * Measures the first start, three warm starts and the stdio MCP start of `command` (default:
 * the production command, `node dist/cli.js`; build first) in checkout `root`, printing one
 * line per figure.
 */
export async function benchStartup(opts: { command?: string[]; root?: string; warmRuns?: number } = {}): Promise<StartupFigures> {
  const root = opts.root ?? process.env.STARTUP_ROOT ?? ROOT_DIR;
  const command = opts.command ?? defaultCommand(root);
  // `serve` as `npm start` runs it (with its node options) unless a command was given;
  // `mcp --stdio` as `npm run cli` runs it.
  const given = Boolean(opts.command || process.env.STARTUP_COMMAND);
  const serveCommand = given ? command : [command[0]!, ...scriptNodeOptions('start', root), ...command.slice(1)];
  const cliCommand = given ? command : [command[0]!, ...scriptNodeOptions('cli', root), ...command.slice(1)];
  const tmp = mkdtempSync(path.join(tmpdir(), 'bench-startup-'));
  const dir = path.join(tmp, 'pglite');
  try {
    console.log(`# start-up of \`${serveCommand.join(' ')} serve\` and \`${cliCommand.join(' ')} mcp --stdio\` in ${root}`);
    const first = await serveOnce(serveCommand, root, dir);
    console.log(`first start (fresh embedded database) to 200 on /readyz: ${fmt(first)}`);
    const warm: StartFigure[] = [];
    for (let i = 0; i < (opts.warmRuns ?? 3); i++) {
      const w = await serveOnce(serveCommand, root, dir);
      warm.push(w);
      console.log(`warm start ${i + 1} to 200 on /readyz: ${fmt(w)}`);
    }
    const sorted = warm.map((w) => w.ms).sort((a, b) => a - b);
    const warmMedianMs = sorted[Math.floor(sorted.length / 2)] ?? NaN;
    const stdio = await stdioOnce(cliCommand, root, dir);
    console.log(
      `stdio MCP (warm) initialize answered: ${fmt(stdio)}; first tools/call get_signals at ${(stdio.firstCallMs / 1000).toFixed(2)} s`,
    );
    const peak = Math.max(first.peakRssMb, ...warm.map((w) => w.peakRssMb), stdio.peakRssMb);
    console.log(
      `start-up summary: first ${(first.ms / 1000).toFixed(2)} s (target < 8), warm median ${(warmMedianMs / 1000).toFixed(2)} s (target < 3), ` +
        `stdio initialize ${(stdio.ms / 1000).toFixed(2)} s (target < 3), peak RSS max ${peak} MB (target < 512)`,
    );
    return { command, first, warm, warmMedianMs, stdio };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchStartup().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
