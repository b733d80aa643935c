// npm run bench: measures, in one run, against baselines measured in the same run:
//  1. GET /api/v1/signals throughput and p99 of the service vs a bare Fastify route serving
//     the same bytes (ratio; target >= 0.8);
//  2. the time of a full signal-history backfill of all assets (target < 5 s);
//  3. the service's peak RSS under that load (target < 512 MB).
// Load comes from autocannon on loopback; each server is its own process.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { ROOT_DIR } from '../src/config.ts';
import { DatasetProvider } from '../src/providers/dataset/dataset.ts';
import { MarketService } from '../src/services/market.ts';
import { openDatabase } from '../src/store/db.ts';
import { HistoryRepo } from '../src/store/history-repo.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

function start(args: string[], env: Record<string, string> = {}): Promise<{ proc: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT_DIR, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /LISTENING (\d+)/.exec(buf) ?? /"port":(\d+)/.exec(buf) ?? /listening at http:\/\/127\.0\.0\.1:(\d+)/i.exec(buf);
      if (m) resolve({ proc, port: Number(m[1]) });
      if (buf.length > 1e6) buf = buf.slice(-1000);
    });
    proc.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

async function load(url: string, headers: Record<string, string> = {}): Promise<{ rps: number; p99: number; errors: number; non2xx: number }> {
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers }); // warm-up
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx };
}

function row(name: string, r: { rps: number; p99: number; non2xx: number }, base?: { rps: number; p99: number }) {
  const ratio = base ? `  throughput ratio ${(r.rps / base.rps).toFixed(2)}, p99 ratio ${(r.p99 / Math.max(base.p99, 1)).toFixed(2)}` : '';
  console.log(`${name.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s  p99 ${String(r.p99).padStart(4)} ms  non-2xx ${r.non2xx}${ratio}`);
}

async function main() {
  console.log(`# bench: ${DURATION}s per run, ${CONNECTIONS} connections, node ${process.version}`);

  // 2. Backfill time (fresh embedded database, all assets, computation + storage).
  const t0 = performance.now();
  const db = await openDatabase({ pgliteDir: 'memory://' });
  const t1 = performance.now();
  const market = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), new HistoryRepo(db.db));
  const t2 = performance.now();
  const res = await market.backfill();
  const t3 = performance.now();
  await db.close();
  const rows = res.reduce((s, r) => s + r.inserted, 0);
  console.log(`backfill: load+compute ${(t2 - t1).toFixed(0)} ms, store ${rows} changes ${(t3 - t2).toFixed(0)} ms, total ${((t3 - t1) / 1000).toFixed(2)} s (target < 5 s; PGlite open+migrate ${(t1 - t0).toFixed(0)} ms not counted)`);

  // 1. Throughput against the bare route.
  const svc = await start(['src/cli.ts', 'serve'], { PORT: '0', HOST: '127.0.0.1', PGLITE_DIR: 'memory://', LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info' });
  const url = `http://127.0.0.1:${svc.port}/api/v1/signals`;
  const body = await (await fetch(url)).text();
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'bench-')), 'signals.json');
  writeFileSync(file, body);
  const bare = await start(['bench/bare-server.ts', file, '0']);
  const bareUrl = `http://127.0.0.1:${bare.port}/api/v1/signals`;
  try {
    const base = await load(bareUrl);
    row('bare Fastify route (same bytes)', base);
    const mine = await load(url);
    row('GET /api/v1/signals', mine, base);
    console.log(`service peak RSS: ${peakRssMb(svc.proc.pid!).toFixed(0)} MB (target < 512 MB)`);
  } finally {
    svc.proc.kill('SIGTERM');
    bare.proc.kill('SIGTERM');
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
