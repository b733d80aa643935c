// npm run bench: measures, in one run, against baselines measured in the same run:
//  1. the time of a full signal-history backfill of all assets (target < 5 s);
//  2. keyed GET /api/v1/signals through the whole pipeline (API key lookup, tier, rate
//     limiter, envelope) vs a bare Fastify route serving the same bytes: with the in-memory
//     limiter (target ratio >= 0.8 for the core, >= 0.7 keyed) and the Redis limiter (>= 0.5);
//  3. MCP tools/call get_signals vs a bare SDK server on the same stack returning the same
//     payload (target >= 0.8);
//  4. the service's peak RSS under that load (target < 512 MB);
//  5. the web dashboard's overview: page weight and time to first render / interactive in
//     headless Chromium (bench/dashboard.ts; targets < 300 KB JS gzipped, < 1 s).
// Every request is allowed: the load rotates over a pool of api-tier keys (500 requests per
// minute each), large enough that no key runs out during a run. The baselines get the same
// rotating Authorization header, so the load generator does the same work in every run.
// Load comes from autocannon on loopback; each server is its own process.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ROOT_DIR } from '../src/config.ts';
import { generateKey } from '../src/auth/api-keys.ts';
import { TIER_LIMITS } from '../src/auth/tiers.ts';
import { DatasetProvider } from '../src/providers/dataset/dataset.ts';
import { MarketService } from '../src/services/market.ts';
import { KeyRepo } from '../src/store/key-repo.ts';
import { UserRepo } from '../src/store/user-repo.ts';
import { openDatabase } from '../src/store/db.ts';
import { HistoryRepo } from '../src/store/history-repo.ts';
import { runBackfill } from '../src/jobs/backfill.ts';
import { benchIngest } from './ingest.ts';
import { benchDashboard } from './dashboard.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A free loopback port (the OS picks it; released before the server binds it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/**
 * Starts `node --import tsx <args>` with PORT set to a free port (the bare servers take it as
 * their last argument) and waits until it answers on that port.
 */
async function start(args: string[], env: Record<string, string> = {}): Promise<{ proc: ChildProcess; port: number }> {
  const port = await freePort();
  const argv = args.map((a) => (a === '0' ? String(port) : a));
  const proc = spawn(
    process.execPath,
    [...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []), '--import', 'tsx', ...argv],
    {
      cwd: ROOT_DIR,
      env: { ...process.env, ...env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  let exited = false;
  proc.on('exit', () => (exited = true));
  for (let i = 0; i < 600; i++) {
    if (exited) throw new Error(`${args.join(' ')} exited with ${proc.exitCode}`);
    try {
      await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1000) });
      return { proc, port };
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  proc.kill('SIGKILL');
  throw new Error(`${args.join(' ')} did not listen on ${port} within 60 s`);
}

/** A process's peak (VmHWM) and current (VmRSS) resident set size, MB. */
function memMb(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  return { peak: mb('VmHWM'), now: mb('VmRSS') };
}

/** Peak resident set size of a process so far, MB. */
const peakRssMb = (pid: number) => memMb(pid).peak;

/** Memory of a service run: peak during start-up, peak overall, and resident after the load. */
function memLine(pid: number, startupPeak: number): string {
  const m = memMb(pid);
  return `peak ${m.peak.toFixed(0)} MB (start-up peak ${startupPeak.toFixed(0)} MB), resident after load ${m.now.toFixed(0)} MB`;
}

interface LoadOpts {
  method?: 'GET' | 'POST';
  body?: string;
  headers?: Record<string, string>;
  /** API keys to rotate over, one per request (as `Authorization: Bearer`). */
  keys?: string[];
}

async function load(url: string, o: LoadOpts = {}): Promise<{ rps: number; p99: number; errors: number; non2xx: number }> {
  let i = 0;
  const keys = o.keys;
  const opts = {
    url,
    connections: CONNECTIONS,
    method: o.method ?? 'GET',
    body: o.body,
    headers: o.headers ?? {},
    requests: keys
      ? [
          {
            setupRequest: (req: { headers: Record<string, string> }) => {
              req.headers = { ...req.headers, authorization: `Bearer ${keys[i++ % keys.length]}` };
              return req;
            },
          },
        ]
      : undefined,
  };
  await autocannon({ ...opts, duration: 2 }); // warm-up
  const r = await autocannon({ ...opts, duration: DURATION });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx };
}

/**
 * Creates `n` api-tier keys (5 per user, the per-user maximum) in the embedded database at
 * `dir`, so the service started on that folder accepts them.
 */
async function keyPool(dir: string, n: number, tag: string, databaseUrl?: string): Promise<string[]> {
  const db = await openDatabase({ pgliteDir: dir, databaseUrl });
  try {
    const users = new UserRepo(db.db);
    const keyRepo = new KeyRepo(db.db);
    const keys: string[] = [];
    for (let u = 0; keys.length < n; u++) {
      const email = `bench-${tag}-${u}@example.com`;
      await users.ensureUser(`bench-${tag}-${u}`, email);
      await users.setTierByEmail(email, 'api');
      for (let k = 0; k < 5 && keys.length < n; k++) {
        const g = generateKey();
        await keyRepo.createKey(`bench-${tag}-${u}`, 'bench', g.prefix, g.hash, 5);
        keys.push(g.key);
      }
    }
    return keys;
  } finally {
    await db.close();
  }
}

/** Keys needed so that none exceeds its per-minute limit at `rps` over warm-up + run (x1.5 margin). */
function poolSize(rps: number): number {
  return Math.ceil((rps * (DURATION + 2) * 1.5) / TIER_LIMITS.api.minute);
}

async function redisUp(): Promise<boolean> {
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

/** Throughputs the key pools are sized for (far above what this service reaches on loopback). */
const REST_RPS_CEILING = Number(process.env.BENCH_REST_RPS_CEILING ?? 40_000);
const MCP_RPS_CEILING = Number(process.env.BENCH_MCP_RPS_CEILING ?? 4_000);

const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
};
const MCP_CALL = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_signals', arguments: {} } });

function row(name: string, r: { rps: number; p99: number; non2xx: number }, base?: { rps: number; p99: number }) {
  if (r.non2xx > 0) console.log(`WARNING: ${name}: ${r.non2xx} non-2xx responses (refused or failed requests make the figure meaningless)`);
  const ratio = base ? `  throughput ratio ${(r.rps / base.rps).toFixed(2)}, p99 ratio ${(r.p99 / Math.max(base.p99, 1)).toFixed(2)}` : '';
  console.log(`${name.padEnd(44)} ${r.rps.toFixed(0).padStart(7)} req/s  p99 ${String(r.p99).padStart(4)} ms  non-2xx ${r.non2xx}${ratio}`);
}

async function main() {
  console.log(`# bench: ${DURATION}s per run after 2s warm-up, ${CONNECTIONS} connections, node ${process.version}`);

  // 1. Backfill time (fresh embedded database, all assets, computation + storage).
  const t0 = performance.now();
  const mem = await openDatabase({ pgliteDir: 'memory://' });
  const t1 = performance.now();
  const market = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), new HistoryRepo(mem.db));
  const t2 = performance.now();
  const res = await runBackfill(market, new HistoryRepo(mem.db));
  const t3 = performance.now();
  await mem.close();
  const rows = res.reduce((s, r) => s + r.inserted, 0);
  console.log(
    `backfill: load+compute ${(t2 - t1).toFixed(0)} ms, store ${rows} changes ${(t3 - t2).toFixed(0)} ms, total ${((t3 - t1) / 1000).toFixed(2)} s (target < 5 s; PGlite open+migrate ${(t1 - t0).toFixed(0)} ms not counted)`,
  );

  // 2. The market-data store: import at first start, one live ingest round.
  await benchIngest();

  const work = mkdtempSync(path.join(tmpdir(), 'bench-'));
  const dir = path.join(work, 'pglite');
  const procs: ChildProcess[] = [];
  const serve = async (env: Record<string, string>) => {
    const s = await start(['src/cli.ts', 'serve'], {
      PORT: '0',
      HOST: '127.0.0.1',
      PGLITE_DIR: dir,
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      ...env,
    });
    procs.push(s.proc);
    return s;
  };
  const stop = (p: ChildProcess) =>
    new Promise<void>((r) => {
      if (p.exitCode !== null) return r();
      p.once('exit', () => r());
      p.kill('SIGTERM');
    });
  try {
    // Capture the payloads the baselines serve.
    let svc = await serve({});
    const signalsUrl = `http://127.0.0.1:${svc.port}/api/v1/signals`;
    const body = await (await fetch(signalsUrl)).text();
    const mcpRes = (await (
      await fetch(`http://127.0.0.1:${svc.port}/mcp`, { method: 'POST', headers: MCP_HEADERS, body: MCP_CALL })
    ).json()) as { result: unknown };
    await benchDashboard(`http://127.0.0.1:${svc.port}`);
    await stop(svc.proc);
    const bodyFile = path.join(work, 'signals.json');
    writeFileSync(bodyFile, body);
    const mcpFile = path.join(work, 'mcp-result.json');
    writeFileSync(mcpFile, JSON.stringify(mcpRes.result));

    // Key pools sized for the throughput ceilings below; the baselines get the same rotating
    // Authorization header (and ignore it), so the load generator does the same work per request.
    const n = poolSize(REST_RPS_CEILING);
    const nMcp = poolSize(MCP_RPS_CEILING);
    const withRedis = await redisUp();
    const memKeys = await keyPool(dir, n, 'mem');
    const mcpKeys = await keyPool(dir, nMcp, 'mcp');
    const redisKeys = withRedis ? await keyPool(dir, n, `redis${Date.now()}`) : [];
    console.log(`key pools: ${n} api-tier keys per REST run, ${nMcp} for MCP (${TIER_LIMITS.api.minute}/min each)`);

    const bare = await start(['bench/bare-server.ts', bodyFile, '0']);
    procs.push(bare.proc);
    const base = await load(`http://127.0.0.1:${bare.port}/api/v1/signals`, { keys: memKeys });
    await stop(bare.proc);
    const bareMcp = await start(['bench/bare-mcp.ts', mcpFile, '0']);
    procs.push(bareMcp.proc);
    const baseMcp = await load(`http://127.0.0.1:${bareMcp.port}/mcp`, {
      method: 'POST',
      body: MCP_CALL,
      headers: MCP_HEADERS,
      keys: mcpKeys,
    });
    await stop(bareMcp.proc);
    for (const r of [base, baseMcp]) {
      if (r.rps * 1.05 > (r === base ? REST_RPS_CEILING : MCP_RPS_CEILING))
        console.log('WARNING: baseline near the key-pool ceiling; raise REST_RPS_CEILING / MCP_RPS_CEILING');
    }

    row('bare Fastify route (same bytes)', base);
    // Each measured run gets its own service process, so each peak RSS belongs to one load.
    const mem: string[] = [];
    svc = await serve({});
    let startup = peakRssMb(svc.proc.pid!);
    const memRun = await load(`http://127.0.0.1:${svc.port}/api/v1/signals`, { keys: memKeys });
    row('GET /api/v1/signals, key + memory limiter', memRun, base);
    mem.push(`REST + memory limiter: ${memLine(svc.proc.pid!, startup)}`);
    await stop(svc.proc);

    svc = await serve({});
    startup = peakRssMb(svc.proc.pid!);
    row('bare SDK MCP server (same payload)', baseMcp);
    const mcpRun = await load(`http://127.0.0.1:${svc.port}/mcp`, { method: 'POST', body: MCP_CALL, headers: MCP_HEADERS, keys: mcpKeys });
    row('MCP tools/call get_signals, key + memory', mcpRun, baseMcp);
    mem.push(`MCP: ${memLine(svc.proc.pid!, startup)}`);
    await stop(svc.proc);

    if (withRedis) {
      svc = await serve({ REDIS_URL });
      startup = peakRssMb(svc.proc.pid!);
      const redisRun = await load(`http://127.0.0.1:${svc.port}/api/v1/signals`, { keys: redisKeys });
      row('GET /api/v1/signals, key + Redis limiter', redisRun, base);
      mem.push(`REST + Redis limiter: ${memLine(svc.proc.pid!, startup)}`);
      await stop(svc.proc);
    } else {
      console.log(`Redis limiter: SKIPPED, no Redis at ${REDIS_URL}`);
    }
    // The same REST load with PostgreSQL instead of the embedded PGlite: no WebAssembly
    // database in the process, and (several instances may share it) no key cache.
    const pgBase = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
    const pgDb = `bench_${process.pid}`;
    const admin = new pg.Client({ connectionString: pgBase, connectionTimeoutMillis: 2000 });
    let pgUrl: string | null = null;
    try {
      await admin.connect();
      await admin.query(`CREATE DATABASE ${pgDb}`);
      pgUrl = pgBase.replace(/\/[^/]*$/, `/${pgDb}`);
    } catch {
      console.log(`PostgreSQL run: SKIPPED, no PostgreSQL at ${pgBase}`);
    }
    if (pgUrl) {
      try {
        const pgKeys = await keyPool(dir, n, 'pg', pgUrl);
        svc = await serve({ DATABASE_URL: pgUrl, AUTH_SECRET: 'bench-'.repeat(8) });
        startup = peakRssMb(svc.proc.pid!);
        const pgRun = await load(`http://127.0.0.1:${svc.port}/api/v1/signals`, { keys: pgKeys });
        row('GET /api/v1/signals, PostgreSQL, memory limiter', pgRun, base);
        mem.push(`REST on PostgreSQL + memory limiter: ${memLine(svc.proc.pid!, startup)}`);
        await stop(svc.proc);
      } finally {
        await admin.query(`DROP DATABASE IF EXISTS ${pgDb} WITH (FORCE)`).catch(() => {});
      }
    }
    await admin.end().catch(() => {});

    console.log('service memory (target: peak RSS < 512 MB):');
    for (const m of mem) console.log(`  ${m}`);
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
