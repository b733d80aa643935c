// The start-up part of `npm run bench` (issue #13, "Must show"): the service's first start
// (empty data folder) and warm start (the same folder again), each timed from spawn to the
// first 200 on /readyz, with the process's peak RSS (VmHWM) at that moment; and the stdio MCP
// server (`cli mcp --stdio`, warm folder) timed from spawn to its answer to `initialize`
// (the SDK's client: connect() sends initialize and waits for the result).
// Start-up runs are not pinned: a start may use both cores, as it would on a server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ROOT_DIR } from '../src/config.ts';
import { median, memMb, serviceCommand, startServer, stopServer } from './harness.ts';

/** Start-up figures: milliseconds to ready, MB of peak RSS (every run, by name). */
export interface StartupFigures {
  firstStartMs: number;
  /** Median over the warm starts. */
  warmStartMs: number;
  /** Median over the warm stdio MCP starts: spawn to the `initialize` result. */
  mcpInitializeMs: number;
  /** Peak RSS (VmHWM) of every process started here, MB. */
  peakRss: { run: string; mb: number }[];
}

/** Runs the start-up measurements (`runs` warm starts of each kind) and prints one line each. */
export async function benchStartup(runs = Number(process.env.BENCH_STARTUP_RUNS ?? 3)): Promise<StartupFigures> {
  const work = mkdtempSync(path.join(tmpdir(), 'bench-startup-'));
  const env = { PGLITE_DIR: path.join(work, 'pglite'), LOG_LEVEL: 'info' };
  const peakRss: { run: string; mb: number }[] = [];
  const startOnce = async (run: string): Promise<number> => {
    const s = await startServer(run, serviceCommand(), { env, readyPath: '/readyz', pin: false, timeoutMs: 180_000 });
    // VmHWM is the peak so far: read at ready, and once more after a second of idling.
    await new Promise((r) => setTimeout(r, 1000));
    peakRss.push({ run, mb: memMb(s.pid).peak });
    await stopServer(s);
    console.log(`  ${run}: ready (200 on /readyz) after ${(s.readyMs / 1000).toFixed(2)} s, peak RSS ${peakRss.at(-1)!.mb.toFixed(0)} MB`);
    return s.readyMs;
  };
  try {
    const first = await startOnce('first start (empty data folder)');
    const warm: number[] = [];
    for (let i = 1; i <= runs; i++) warm.push(await startOnce(`warm start ${i}`));
    const mcp: number[] = [];
    for (let i = 1; i <= runs; i++) {
      const [command, ...args] = serviceCommand('mcp', '--stdio');
      const transport = new StdioClientTransport({
        command: command!,
        args,
        cwd: ROOT_DIR,
        env: { ...(process.env as Record<string, string>), ...env, LOG_LEVEL: 'silent' },
        stderr: 'ignore',
      });
      const client = new Client({ name: 'bench', version: '1.0.0' });
      const t0 = performance.now();
      await client.connect(transport);
      const ms = performance.now() - t0;
      mcp.push(ms);
      if (transport.pid) peakRss.push({ run: `stdio MCP ${i}`, mb: memMb(transport.pid).peak });
      await client.close();
      console.log(
        `  stdio MCP ${i} (warm): initialize answered after ${(ms / 1000).toFixed(2)} s, peak RSS ${peakRss.at(-1)?.mb.toFixed(0)} MB`,
      );
    }
    return { firstStartMs: first, warmStartMs: median(warm), mcpInitializeMs: median(mcp), peakRss };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
