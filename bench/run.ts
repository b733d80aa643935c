// npm run bench: every figure of issue #13's "Must show" (and the earlier issues' backfill,
// ingest and dashboard figures), each against baselines measured in the same run.
//
// Method (docs/benchmarks.md): the load generator is wrk, in its own process pinned to one
// core (taskset -c 0), with a Lua script that rotates the Authorization header over a pool of
// api-tier keys; every server under test is its own process pinned to the other core
// (taskset -c 1). Per run: throughput, p99 (wrk's latency histogram) and the server's CPU
// time per request (utime + stime from /proc/<pid>/stat over the run / requests served).
// Comparisons are interleaved: in each of BENCH_ROUNDS rounds every contender gets a warm-up
// run and a measured run, in a fresh random order, and the medians are compared. Every key of
// a pool is used once before anything is measured (warm caches), and pools are large enough
// that no key reaches its per-minute limit (any non-2xx is reported as a warning).
//
// Contenders: "bare", a Fastify route serving the same bytes (bench/bare-server.ts); "peer",
// the same features built from the standard plugins (bench/peer-server.ts: @fastify/bearer-auth
// over a Map of SHA-256 digests, @fastify/rate-limit in memory or with its Redis store for the
// key's window and the account ceiling, @fastify/cors, @fastify/compress, fastify-metrics, a
// pino access-log line, usage counted per key, the same headers), and beside it the minimal
// peer of the first ten sessions (one window, static CORS headers, no compression plugin, no
// metrics, no usage), for comparison with their figures; the bare SDK MCP server
// (bench/bare-mcp.ts); the service
// (serviceCommand(): compiled dist/cli.js when present, else src/cli.ts through tsx).
//
// BENCH_ONLY=rest,redis,mcp,keys10k,signin,startup,backfill,ingest,dashboard,flush,trackrecord picks
// sections (default: all). Other knobs: BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_CONNECTIONS,
// BENCH_ROUNDS, BENCH_LONG_SECONDS, BENCH_LONG_CONTROL, BENCH_BASE_ROOT, BENCH_PIN, BENCH_PG_URL, BENCH_REDIS_URL (bench/harness.ts).
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { loadConfig, ROOT_DIR } from '../src/config.ts';
import { generateKey } from '../src/auth/api-keys.ts';
import { TIER_LIMITS } from '../src/auth/tiers.ts';
import { runBackfill } from '../src/jobs/backfill.ts';
import { DatasetProvider } from '../src/providers/dataset/dataset.ts';
import { trackRecord } from '../src/services/backtest.ts';
import { MarketService } from '../src/services/market.ts';
import { openDatabase } from '../src/store/db.ts';
import { HistoryRepo } from '../src/store/history-repo.ts';
import { apiKeys, appUsers } from '../src/store/schema.ts';
import { benchDashboard } from './dashboard.ts';
import {
  CONNECTIONS,
  DURATION,
  ROUNDS,
  type Contender,
  interleave,
  type LoadSpec,
  type Medians,
  median,
  memMb,
  perRound,
  methodLine,
  requireWrk,
  runLine,
  scriptCommand,
  type Server,
  serviceCommand,
  serviceCommandAt,
  sidecarText,
  startServer,
  stopServer,
  warmKeys,
  wrk,
  freePort,
  WARMUP,
  coreSpeed,
  coreSpeedLine,
  type CoreSpeed,
} from './harness.ts';
import { benchIngest } from './ingest.ts';
import { benchStartup, type StartupFigures } from './startup.ts';

const SECTIONS = [
  'backfill',
  'ingest',
  'dashboard',
  'rest',
  'redis',
  'mcp',
  'keys10k',
  'signin',
  'startup',
  'flush',
  'trackrecord',
] as const;
type Section = (typeof SECTIONS)[number];
const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/** Throughput the REST key pools are sized for (no key may reach 500/min below it). */
const REST_RPS_CEILING = Number(process.env.BENCH_REST_RPS_CEILING ?? 20_000);
const MCP_RPS_CEILING = Number(process.env.BENCH_MCP_RPS_CEILING ?? 4_000);
/** Length of the 10,000-key run, s (the issue's 3 minutes by default). */
const LONG_SECONDS = Number(process.env.BENCH_LONG_SECONDS ?? 180);
const LONG_KEYS = Number(process.env.BENCH_LONG_KEYS ?? 10_000);
const BUCKET_SECONDS = 10;
/**
 * Whether the 10,000-key section also runs the bare route for the same length under the same
 * rotation (default on; BENCH_LONG_CONTROL=0 skips it): how far this machine's own speed moves
 * per interval, the floor under the service's stability figure.
 */
const LONG_CONTROL = process.env.BENCH_LONG_CONTROL !== '0';
/** The longest USAGE_FLUSH_MS that `settleUsageFlush` waits for, ms. */
const SETTLE_MAX_FLUSH_MS = 60_000;
/**
 * Waits one usage-flush interval (the service's USAGE_FLUSH_MS, read as the service reads it)
 * plus 1 s, so that the usage counted by a run before is written before the next run starts.
 */
function settleUsageFlush(): Promise<void> {
  const interval = loadConfig(process.env).USAGE_FLUSH_MS;
  // An interval set to keep flushes out of the runs (more than SETTLE_MAX_FLUSH_MS, e.g.
  // USAGE_FLUSH_MS=600000 to see the p99 without flushes) has nothing to wait for.
  if (interval > SETTLE_MAX_FLUSH_MS) return Promise.resolve();
  return new Promise((r) => setTimeout(r, interval + 1000));
}

/** Another checkout whose build joins the `rest` section as "service (base)" (BENCH_BASE_ROOT). */
const BASE_ROOT = process.env.BENCH_BASE_ROOT ?? null;

/** The median of per-interval throughputs and the largest relative deviation from it. */
function stability(buckets: number[]): { mid: number; worst: number } {
  const mid = buckets.length > 0 ? median(buckets) : NaN;
  return { mid, worst: buckets.reduce((w, b) => Math.max(w, Math.abs(b - mid) / mid), 0) };
}

const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
};
const MCP_CALL = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_signals', arguments: {} } });
const SIGNALS = '/api/v1/signals';

/** Keys needed so that none exceeds the api tier's per-minute limit at `rps` (x1.25 margin). */
const poolFor = (rps: number) => Math.ceil(((rps * 60) / TIER_LIMITS.api.minute) * 1.25);

/**
 * Slowest / fastest pass of the core-speed probe above which the summary warns that the
 * machine, not the servers, can decide a verdict near its target.
 */
const SPEED_SPREAD_WARN = 1.15;

/** Prints the core-speed probes of the start and the end, and a warning when the core's speed moved. */
function speedWarning(before: CoreSpeed, after: CoreSpeed): void {
  console.log(`  ${coreSpeedLine('at the start', before)}`);
  console.log(`  ${coreSpeedLine('at the end', after)}`);
  const all = [...before.samples, ...after.samples];
  const spread = Math.max(...all) / Math.min(...all);
  if (spread > SPEED_SPREAD_WARN)
    console.log(
      `  WARNING: the server core ran the same loop up to ${spread.toFixed(2)}x slower in one pass than in another: a ratio ` +
        `within that factor of its target can be decided by when each run fell, not by the servers (compare the per-round ratios)`,
    );
}

/** One "Must show" line of the summary. */
interface Verdict {
  what: string;
  figure: string;
  target: string;
  met: boolean | null;
}
const verdicts: Verdict[] = [];
const verdict = (what: string, figure: string, target: string, met: boolean | null) => verdicts.push({ what, figure, target, met });
/** Peak RSS of every service process of the run, MB. */
const serviceRss: { run: string; mb: number }[] = [];

/**
 * Creates `n` api-tier keys (5 per user, the per-user maximum) in the database (PGlite folder
 * `dir`, or `databaseUrl`), so the service started on it accepts them. The rows are the ones
 * UserRepo.ensureUser/setTierByEmail and KeyRepo.createKey write, inserted 500 at a time (one
 * transaction per key would take minutes for 10,000 keys on PGlite).
 */
async function keyPool(dir: string, n: number, tag: string, databaseUrl?: string): Promise<string[]> {
  const db = await openDatabase({ pgliteDir: dir, databaseUrl });
  try {
    const keys = Array.from({ length: n }, () => generateKey());
    const users = Array.from({ length: Math.ceil(n / 5) }, (_, u) => ({
      id: `bench-${tag}-${u}`,
      email: `bench-${tag}-${u}@example.com`,
      tier: 'api' as const,
    }));
    for (let i = 0; i < users.length; i += 500) await db.db.insert(appUsers).values(users.slice(i, i + 500));
    const rows = keys.map((g, i) => ({ userId: `bench-${tag}-${Math.floor(i / 5)}`, name: 'bench', prefix: g.prefix, keyHash: g.hash }));
    for (let i = 0; i < rows.length; i += 500) await db.db.insert(apiKeys).values(rows.slice(i, i + 500));
    return keys.map((g) => g.key);
  } finally {
    await db.close();
  }
}

/**
 * The Redis server at REDIS_URL: null when it does not answer PING; else its pid when it runs
 * on this machine (INFO server's process_id, and /proc says that process is a redis-server:
 * not one in a container's pid space), for its own CPU per request (`Contender.sidecars`).
 */
async function redisServer(): Promise<{ pid: number | null } | null> {
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
  try {
    await r.connect();
    if ((await r.ping()) !== 'PONG') return null;
    const pid = Number(/process_id:(\d+)/.exec(await r.info('server'))?.[1]);
    const comm = pid && existsSync(`/proc/${pid}/comm`) ? readFileSync(`/proc/${pid}/comm`, 'utf8').trim() : '';
    return { pid: comm.startsWith('redis-server') ? pid : null };
  } catch {
    return null;
  } finally {
    r.disconnect();
  }
}

const ratio = (a: number, b: number) => a / b;
const x = (v: number) => `${v.toFixed(2)}x`;

/** Starts the service on `env` (pinned) and remembers its process for the memory table. */
async function service(name: string, env: Record<string, string>, port?: number, root?: string): Promise<Server> {
  return startServer(name, root ? serviceCommandAt(root) : serviceCommand(), {
    env: { LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info', ...env },
    readyPath: '/readyz',
    port,
  });
}

/** Stops a service process after recording its peak RSS. */
async function stopService(s: Server): Promise<void> {
  serviceRss.push({ run: s.name, mb: memMb(s.pid).peak });
  await stopServer(s);
}

/** Prints medians and ratios of an interleaved comparison. */
function printMedians(m: Map<string, Medians>, subject: string): void {
  const s = m.get(subject)!;
  for (const [name, r] of m) {
    const rel = name === subject ? '' : `   ${subject} / this: throughput ${x(ratio(s.rps, r.rps))}, CPU/req ${x(ratio(s.cpuUs, r.cpuUs))}`;
    const side = sidecarText(r.sidecarCpuUs);
    console.log(
      `  median ${name.padEnd(34)} ${r.rps.toFixed(0).padStart(7)} req/s  p99 ${r.p99.toFixed(1).padStart(6)} ms  CPU ${r.cpuUs.toFixed(0).padStart(5)} µs/req${side}${rel}`,
    );
  }
}

/** What the first service start captures for the baselines: the bytes and headers to serve. */
interface Payloads {
  bodyFile: string;
  headersFile: string;
  mcpFile: string;
}

async function main() {
  const only = new Set<string>(
    (process.env.BENCH_ONLY ?? SECTIONS.join(','))
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const s of only)
    if (!(SECTIONS as readonly string[]).includes(s)) throw new Error(`BENCH_ONLY: unknown section ${s} (known: ${SECTIONS.join(', ')})`);
  const want = (s: Section) => only.has(s);
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(`# bench: ${methodLine()}; node ${process.version}; service: ${serviceCommand().slice(1).join(' ')}; load average ${load}`);
  // The machine's own speed, before and after: the verdicts compare runs seconds apart.
  const loadSectionsWanted = (['rest', 'redis', 'mcp', 'keys10k', 'signin'] as const).some(want);
  const speedBefore = loadSectionsWanted ? coreSpeed() : null;
  if (speedBefore) console.log(coreSpeedLine('at the start', speedBefore));

  if (want('backfill')) {
    // Backfill time (fresh embedded database, all assets, computation + storage).
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
      `backfill: load+compute ${(t2 - t1).toFixed(0)} ms, store ${rows} changes ${(t3 - t2).toFixed(0)} ms, total ${((t3 - t1) / 1000).toFixed(2)} s (target < 5 s); ` +
        `with the in-memory PGlite open+migrate (${(t1 - t0).toFixed(0)} ms) ${((t3 - t0) / 1000).toFixed(2)} s`,
    );
  }
  if (want('ingest')) await benchIngest();

  const loadSections = (['dashboard', 'rest', 'redis', 'mcp', 'keys10k', 'signin'] as const).filter(want);
  const work = mkdtempSync(path.join(tmpdir(), 'bench-'));
  const running: Server[] = [];
  const track = (s: Server) => (running.push(s), s);
  try {
    if (loadSections.length > 0) {
      if (loadSections.some((s) => s !== 'dashboard')) requireWrk();
      const dir = path.join(work, 'pglite');
      const restN = poolFor(REST_RPS_CEILING);
      const poolN = want('keys10k') ? Math.max(restN, LONG_KEYS) : restN;
      const t0 = performance.now();
      const pool = await keyPool(dir, poolN, 'rest');
      const mcpKeys = want('mcp') ? await keyPool(dir, poolFor(MCP_RPS_CEILING), 'mcp') : [];
      console.log(
        `key pools: ${restN} api-tier keys for REST runs${want('keys10k') ? ` (of ${poolN} for the ${LONG_KEYS}-key run)` : ''}, ${mcpKeys.length} for MCP ` +
          `(${TIER_LIMITS.api.minute}/min each; created in ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
      );
      const restKeys = pool.slice(0, restN);
      const writeKeys = (name: string, keys: string[]) => {
        const f = path.join(work, name);
        writeFileSync(f, keys.join('\n') + '\n');
        return f;
      };
      const restFile = writeKeys('rest.keys', restKeys);
      const rest: LoadSpec = { path: SIGNALS, keysFile: restFile };
      const mcpSpec: LoadSpec = {
        path: '/mcp',
        method: 'POST',
        body: MCP_CALL,
        headers: MCP_HEADERS,
        keysFile: writeKeys('mcp.keys', mcpKeys),
      };

      // Capture what the baselines serve: the keyed body and static headers, the MCP result.
      const cap = track(await service('service (capture)', { PGLITE_DIR: dir }));
      // No compression asked, as wrk asks none (fetch would send Accept-Encoding: gzip, deflate,
      // and the service's Vary would then name accept-encoding).
      const keyed = await fetch(`${cap.url}${SIGNALS}`, {
        headers: { authorization: `Bearer ${restKeys[0]}`, 'accept-encoding': 'identity' },
      });
      const body = await keyed.text();
      const staticNames = [
        'content-type',
        'etag',
        'cache-control',
        'vary',
        'x-service-tier',
        'x-content-type-options',
        'access-control-allow-origin',
        'access-control-expose-headers',
      ];
      const headers = Object.fromEntries(staticNames.flatMap((h) => (keyed.headers.get(h) ? [[h, keyed.headers.get(h)!]] : [])));
      const p: Payloads = {
        bodyFile: path.join(work, 'signals.json'),
        headersFile: path.join(work, 'headers.json'),
        mcpFile: path.join(work, 'mcp.json'),
      };
      writeFileSync(p.bodyFile, body);
      writeFileSync(p.headersFile, JSON.stringify(headers));
      if (want('mcp')) {
        const r = (await (
          await fetch(`${cap.url}/mcp`, {
            method: 'POST',
            headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpKeys[0]}` },
            body: MCP_CALL,
          })
        ).json()) as { result: unknown };
        writeFileSync(p.mcpFile, JSON.stringify(r.result));
      }
      if (want('dashboard')) await benchDashboard(cap.url);
      await stopService(cap);

      const bare = () => startServer('bare Fastify route', scriptCommand('bench/bare-server.ts', p.bodyFile), { readyPath: SIGNALS });
      /**
       * The peer on `keysFile`: with the service's per-request features from the standard
       * plugins (PEER_FEATURES=full), or the minimal peer of the first ten sessions, run beside
       * it for comparison with their figures (bench/peer-server.ts).
       */
      const peer = (keysFile: string, features: 'full' | 'minimal', env: Record<string, string> = {}) =>
        startServer(
          `peer${features === 'minimal' ? ', minimal' : ''} (${env.REDIS_URL ? 'Redis' : 'memory'} store)`,
          scriptCommand('bench/peer-server.ts', p.bodyFile, p.headersFile, keysFile),
          { env: { ...env, PEER_FEATURES: features }, readyPath: undefined },
        );
      /** An information line of the same rounds (no verdict): `service` against `other`, labelled `label`. */
      const versus = (m: Map<string, Medians>, service: string, other: string, label = other) =>
        console.log(
          `  service / ${label}: throughput ${x(m.get(service)!.rps / m.get(other)!.rps)}, CPU/req ${x(m.get(service)!.cpuUs / m.get(other)!.cpuUs)}; ${perRound(m, service, other)}`,
        );

      if (want('rest')) {
        console.log(`REST: keyed GET ${SIGNALS}, embedded PGlite, memory limiter (service) vs peer (memory store) vs bare`);
        const b = track(await bare());
        const pe = track(await peer(restFile, 'full'));
        const pm = track(await peer(restFile, 'minimal'));
        // BENCH_BASE_ROOT: another checkout's build (e.g. the commit before a change) as a
        // fourth contender in the same rounds, on a copy of the data folder made while no
        // process has it open.
        const dirBase = path.join(work, 'pglite-base');
        if (BASE_ROOT) cpSync(dir, dirBase, { recursive: true });
        const sv = track(await service('service, PGlite + memory limiter', { PGLITE_DIR: dir }));
        const base = BASE_ROOT ? track(await service(`service (base: ${BASE_ROOT})`, { PGLITE_DIR: dirBase }, undefined, BASE_ROOT)) : null;
        for (const s of [pe, pm, sv, ...(base ? [base] : [])]) await warmKeys(s.url, rest, restKeys);
        const m = await interleave('rest', [
          { name: 'bare', server: b, spec: rest },
          { name: 'peer (memory)', server: pe, spec: rest },
          { name: 'peer, minimal (memory)', server: pm, spec: rest },
          { name: 'service (memory)', server: sv, spec: rest },
          ...(base ? [{ name: 'service (base)', server: base, spec: rest }] : []),
        ]);
        if (base) {
          await stopService(base);
          versus(m, 'service (memory)', 'service (base)', `base (${BASE_ROOT})`);
        }
        await stopService(sv);
        await stopServer(pe);
        await stopServer(pm);
        await stopServer(b);
        printMedians(m, 'service (memory)');
        versus(m, 'service (memory)', 'peer, minimal (memory)');
        const s = m.get('service (memory)')!;
        const vsPeer = ratio(s.rps, m.get('peer (memory)')!.rps);
        const vsBare = ratio(s.rps, m.get('bare')!.rps);
        verdict(
          'keyed GET /api/v1/signals, memory limiter / peer (memory store)',
          `${x(vsPeer)} (CPU/req ${x(s.cpuUs / m.get('peer (memory)')!.cpuUs)}; ${perRound(m, 'service (memory)', 'peer (memory)')})`,
          '>= 1.0x',
          vsPeer >= 1.0,
        );
        verdict(
          'keyed GET /api/v1/signals, memory limiter / bare',
          `${x(vsBare)} (CPU/req ${x(s.cpuUs / m.get('bare')!.cpuUs)}; ${perRound(m, 'service (memory)', 'bare')})`,
          '>= 0.45x',
          vsBare >= 0.45,
        );
      }

      if (want('redis')) {
        const pgDb = `bench_${process.pid}`;
        const admin = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
        let pgUrl: string | null = null;
        try {
          await admin.connect();
          await admin.query(`CREATE DATABASE ${pgDb}`);
          pgUrl = PG_URL.replace(/\/[^/]*$/, `/${pgDb}`);
        } catch {
          console.log(`PostgreSQL + Redis: SKIPPED, no PostgreSQL at ${PG_URL}`);
        }
        const redisHere = pgUrl ? await redisServer() : null;
        if (pgUrl && !redisHere) {
          console.log(`PostgreSQL + Redis: SKIPPED, no Redis at ${REDIS_URL}`);
        } else if (pgUrl) {
          try {
            console.log(`PostgreSQL + Redis: keyed GET ${SIGNALS} (service: DATABASE_URL + REDIS_URL) vs peer (Redis store) vs bare`);
            const pgKeys = await keyPool(dir, restN, 'pg', pgUrl);
            const pgFile = writeKeys('pg.keys', pgKeys);
            const spec: LoadSpec = { path: SIGNALS, keysFile: pgFile };
            const b = track(await bare());
            const pe = track(await peer(pgFile, 'full', { REDIS_URL }));
            const pm = track(await peer(pgFile, 'minimal', { REDIS_URL }));
            const sv = track(
              await service('service, PostgreSQL + Redis', { DATABASE_URL: pgUrl, REDIS_URL, AUTH_SECRET: 'bench-'.repeat(8) }),
            );
            for (const s of [pe, pm, sv]) await warmKeys(s.url, spec, pgKeys);
            // The Redis server's own CPU per request beside each server's (when it runs here).
            const sidecars = redisHere?.pid ? [redisHere.pid] : undefined;
            const m = await interleave('pg+redis', [
              { name: 'bare', server: b, spec },
              { name: 'peer (Redis store)', server: pe, spec, sidecars },
              { name: 'peer, minimal (Redis store)', server: pm, spec, sidecars },
              { name: 'service (PG + Redis)', server: sv, spec, sidecars },
            ]);
            await stopService(sv);
            await stopServer(pe);
            await stopServer(pm);
            await stopServer(b);
            printMedians(m, 'service (PG + Redis)');
            versus(m, 'service (PG + Redis)', 'peer, minimal (Redis store)');
            const s = m.get('service (PG + Redis)')!;
            const vsPeer = ratio(s.rps, m.get('peer (Redis store)')!.rps);
            const vsBare = ratio(s.rps, m.get('bare')!.rps);
            verdict(
              'PostgreSQL + Redis / peer (Redis store)',
              `${x(vsPeer)} (CPU/req ${x(s.cpuUs / m.get('peer (Redis store)')!.cpuUs)}; ${perRound(m, 'service (PG + Redis)', 'peer (Redis store)')})`,
              '>= 1.0x',
              vsPeer >= 1.0,
            );
            verdict(
              'PostgreSQL + Redis / bare',
              `${x(vsBare)} (CPU/req ${x(s.cpuUs / m.get('bare')!.cpuUs)}; ${perRound(m, 'service (PG + Redis)', 'bare')})`,
              '>= 0.35x',
              vsBare >= 0.35,
            );
          } finally {
            await admin.query(`DROP DATABASE IF EXISTS ${pgDb} WITH (FORCE)`).catch(() => {});
          }
        }
        await admin.end().catch(() => {});
      }

      if (want('mcp')) {
        console.log('MCP: tools/call get_signals over streamable HTTP, service vs the bare SDK server (same payload)');
        const b = track(await startServer('bare SDK MCP server', scriptCommand('bench/bare-mcp.ts', p.mcpFile), { readyPath: undefined }));
        const sv = track(await service('service, MCP', { PGLITE_DIR: dir }));
        await warmKeys(sv.url, mcpSpec, mcpKeys);
        const m = await interleave('mcp', [
          { name: 'bare SDK MCP server', server: b, spec: mcpSpec },
          { name: 'service MCP', server: sv, spec: mcpSpec },
        ]);
        await stopService(sv);
        await stopServer(b);
        printMedians(m, 'service MCP');
        const r = ratio(m.get('service MCP')!.rps, m.get('bare SDK MCP server')!.rps);
        verdict(
          'MCP tools/call get_signals / bare SDK server',
          `${x(r)} (CPU/req ${x(m.get('service MCP')!.cpuUs / m.get('bare SDK MCP server')!.cpuUs)}; ${perRound(m, 'service MCP', 'bare SDK MCP server')})`,
          '>= 0.7x',
          r >= 0.7,
        );
      }

      if (want('keys10k')) {
        console.log(
          `${LONG_KEYS} active keys in rotation for ${LONG_SECONDS} s, one service process (PGlite, memory limiter), vs a small pool before and after`,
        );
        const longFile = writeKeys('long.keys', pool.slice(0, LONG_KEYS));
        const longSpec: LoadSpec = { path: SIGNALS, keysFile: longFile };
        const sv = track(await service(`service, ${LONG_KEYS} keys`, { PGLITE_DIR: dir }));
        // The same-run baseline: the smallest pool that stays under the per-minute limit at
        // this throughput (a single api-tier key would be refused after 500 requests a minute).
        await warmKeys(sv.url, rest, restKeys);
        const probe = await wrk(sv.url, rest, Math.max(WARMUP, 2), sv.pid);
        const smallN = Math.min(restN, Math.max(1, poolFor(probe.rps * 1.5)));
        const smallSpec: LoadSpec = { path: SIGNALS, keysFile: writeKeys('small.keys', restKeys.slice(0, smallN)) };
        // Each small-pool run starts after one usage-flush interval of quiet, so that it does
        // not meet the flush of the keys counted just before it (the warm-up's, or the 10,000
        // of the long run: 28.8 ms in one run of the eleventh session) and measures the small
        // pool alone: the stricter baseline.
        await settleUsageFlush();
        const before = await wrk(sv.url, smallSpec, DURATION, sv.pid);
        console.log(`  ${runLine(`${smallN} keys (before)`, before)}`);
        const t0 = performance.now();
        await warmKeys(sv.url, longSpec, pool.slice(0, LONG_KEYS));
        console.log(`  every one of the ${LONG_KEYS} keys used once in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        const long = await wrk(sv.url, longSpec, LONG_SECONDS, sv.pid, BUCKET_SECONDS);
        console.log(`  ${runLine(`${LONG_KEYS} keys, ${LONG_SECONDS} s`, long)}`);
        await settleUsageFlush();
        const after = await wrk(sv.url, smallSpec, DURATION, sv.pid);
        console.log(`  ${runLine(`${smallN} keys (after)`, after)}`);
        await stopService(sv);
        // The stricter of the two small-pool p99s (the lower), measured in the same process.
        const baseP99 = Math.min(before.p99, after.p99);
        const { mid, worst } = stability(long.buckets);
        console.log(
          `  per-${BUCKET_SECONDS}-s throughput (req/s): ${long.buckets.map((b) => b.toFixed(0)).join(' ')}; median ${mid.toFixed(0)}, ` +
            `largest deviation ${(worst * 100).toFixed(1)}%`,
        );
        // What the server did in each interval: a dip with more CPU per request is work in the
        // server (or a slower core); a dip with less server CPU and steal time is the machine.
        const f0 = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : '?');
        console.log(`  per-${BUCKET_SECONDS}-s server CPU µs/req: ${long.bucketCpu.map((c) => f0(c.cpuUsPerReq)).join(' ')}`);
        console.log(`  per-${BUCKET_SECONDS}-s server CPU, % of its core: ${long.bucketCpu.map((c) => f0(c.cpuPct)).join(' ')}`);
        console.log(`  per-${BUCKET_SECONDS}-s steal time of the server core, %: ${long.bucketCpu.map((c) => f0(c.stealPct)).join(' ')}`);
        let control = '';
        if (LONG_CONTROL) {
          // The machine's own floor: the bare route (no per-key work at all) under the same
          // rotation for as long, right after; its intervals move only with the machine.
          const b = track(await bare());
          const c = await wrk(b.url, longSpec, LONG_SECONDS, b.pid, BUCKET_SECONDS);
          await stopServer(b);
          const cs = stability(c.buckets);
          console.log(
            `  control, bare route for ${LONG_SECONDS} s: per-${BUCKET_SECONDS}-s ${c.buckets.map((v) => v.toFixed(0)).join(' ')} req/s; ` +
              `median ${cs.mid.toFixed(0)}, largest deviation ${(cs.worst * 100).toFixed(1)}%; CPU µs/req ${c.bucketCpu.map((v) => f0(v.cpuUsPerReq)).join(' ')}; ` +
              `CPU % of its core ${c.bucketCpu.map((v) => f0(v.cpuPct)).join(' ')}; steal % ${c.bucketCpu.map((v) => f0(v.stealPct)).join(' ')}`,
          );
          control = `; bare route in the same conditions ${(cs.worst * 100).toFixed(1)}%`;
        }
        verdict(
          `${LONG_KEYS} keys: p99 / ${smallN}-key p99 (same process)`,
          `${long.p99.toFixed(1)} / ${baseP99.toFixed(1)} ms = ${x(long.p99 / baseP99)}`,
          '<= 2x',
          long.p99 <= 2 * baseP99,
        );
        verdict(
          `${LONG_KEYS} keys: per-10-s throughput vs median over ${LONG_SECONDS} s`,
          long.buckets.length > 0
            ? `worst ${(worst * 100).toFixed(1)}% off (${long.buckets.length} intervals${control})`
            : 'no full interval',
          'within 20%',
          long.buckets.length > 0 ? worst <= 0.2 : null,
        );
      }

      if (want('signin')) {
        // Two identical service processes on copies of the same data folder: the one that is
        // signed into ("signed-in") and a control that never is. Both are measured in the same
        // interleaved rounds before and after the sign-in, so the control's after/before ratio
        // is this machine's drift over the section and the verdict is the difference in
        // differences: (signed-in after / control after) / (signed-in before / control before).
        console.log(
          'sign-in: keyed throughput before and after a sign-in through the embedded identity provider, one process signed into and an identical control process',
        );
        const dirB = path.join(work, 'pglite-signin');
        cpSync(dir, dirB, { recursive: true });
        const portA = await freePort();
        const portB = await freePort();
        const control = track(
          await service('service, control (no sign-in)', { PGLITE_DIR: dir, PUBLIC_URL: `http://127.0.0.1:${portA}` }, portA),
        );
        const url = `http://127.0.0.1:${portB}`;
        const sv = track(await service('service, sign-in', { PGLITE_DIR: dirB, PUBLIC_URL: url }, portB));
        for (const s of [control, sv]) await warmKeys(s.url, rest, restKeys);
        const contenders: Contender[] = [
          { name: 'control', server: control, spec: rest },
          { name: 'signed-in', server: sv, spec: rest },
        ];
        // Twice the rounds of half the length (at least 3 s): the same measuring time, cut into
        // twice as many interleaved pairs. The verdict asks for 5% resolution, and one 10-s run
        // of an identical process moves about +-7% on this machine: on one build 3 rounds of 10 s
        // read 0.94x, 6 rounds of 5 s 0.98x (docs/benchmarks.md, fifteenth session).
        const signinRuns = { rounds: ROUNDS * 2, seconds: Math.max(3, Math.round(DURATION / 2)) };
        console.log(`  each phase: ${signinRuns.rounds} interleaved rounds of ${WARMUP} s warm-up + ${signinRuns.seconds} s`);
        const before = await interleave('before sign-in', contenders, signinRuns);
        const email = `bench-${Date.now()}@example.com`;
        const password = 'correct horse battery staple bench';
        const post = (p2: string, bodyObj: unknown) =>
          fetch(`${url}${p2}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', origin: url },
            body: JSON.stringify(bodyObj),
          });
        const up = await post('/auth/sign-up/email', { name: 'Bench', email, password });
        const inn = await post('/auth/sign-in/email', { email, password });
        if (up.status !== 200 || inn.status !== 200) throw new Error(`sign-up ${up.status} / sign-in ${inn.status}: ${await inn.text()}`);
        console.log('  signed up and signed in through /auth/sign-up/email, /auth/sign-in/email (signed-in process only)');
        // Every key used again on both, so both phases start with the same warm key caches.
        for (const s of [control, sv]) await warmKeys(s.url, rest, restKeys);
        const after = await interleave('after sign-in', contenders, signinRuns);
        await stopService(sv);
        await stopService(control);
        const med = (m: Map<string, Medians>, n: string) => m.get(n)!;
        const raw = ratio(med(after, 'signed-in').rps, med(before, 'signed-in').rps);
        const drift = ratio(med(after, 'control').rps, med(before, 'control').rps);
        const did = raw / drift;
        const cpuDid =
          med(after, 'signed-in').cpuUs / med(after, 'control').cpuUs / (med(before, 'signed-in').cpuUs / med(before, 'control').cpuUs);
        console.log(
          `  signed-in median ${med(before, 'signed-in').rps.toFixed(0)} -> ${med(after, 'signed-in').rps.toFixed(0)} req/s (${x(raw)}), ` +
            `CPU ${med(before, 'signed-in').cpuUs.toFixed(0)} -> ${med(after, 'signed-in').cpuUs.toFixed(0)} µs/req; ` +
            `control ${med(before, 'control').rps.toFixed(0)} -> ${med(after, 'control').rps.toFixed(0)} req/s (${x(drift)}, the machine's drift); ` +
            `signed-in / control before ${perRound(before, 'signed-in', 'control')}, after ${perRound(after, 'signed-in', 'control')}`,
        );
        verdict(
          'keyed throughput after a sign-in / before, drift-corrected by an identical control process',
          `${x(did)} (raw ${x(raw)}, control ${x(drift)}; CPU/req ${x(cpuDid)}; ${signinRuns.rounds} x ${signinRuns.seconds} s per phase)`,
          '>= 0.95x',
          did >= 0.95,
        );
      }
    }

    if (want('startup')) {
      console.log('start-up (not pinned):');
      const st: StartupFigures = await benchStartup();
      verdict('first start to 200 on /readyz', `${(st.first.ms / 1000).toFixed(2)} s`, '< 8 s', st.first.ms < 8000);
      verdict('warm start to 200 on /readyz (median)', `${(st.warmMedianMs / 1000).toFixed(2)} s`, '< 3 s', st.warmMedianMs < 3000);
      verdict('stdio MCP answers initialize, warm', `${(st.stdio.ms / 1000).toFixed(2)} s`, '< 3 s', st.stdio.ms < 3000);
      serviceRss.push({ run: 'first start', mb: st.first.peakRssMb });
      st.warm.forEach((w, i) => serviceRss.push({ run: `warm start ${i + 1}`, mb: w.peakRssMb }));
      serviceRss.push({ run: 'stdio MCP', mb: st.stdio.peakRssMb });
    }

    if (want('trackrecord')) {
      // The first GET /track-record after a start or reload: the longest the event loop is held,
      // computing on the calling thread (the baseline: what the service did before) against
      // MarketService.trackRecord's worker thread, both in this process, 3 times each.
      const market = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), null);
      // The longest event-loop delay while `f` runs (perf_hooks monitorEventLoopDelay, 1 ms
      // resolution), ms. The monitor's timer must have ticked before `f` starts (and is not
      // reset then): its first tick only records a start, so a computation that blocks at once
      // would not be seen. The idle 50 ms before add delays of about 1 ms.
      const stall = async (f: () => unknown): Promise<{ gap: number; ms: number }> => {
        const h = monitorEventLoopDelay({ resolution: 1 });
        h.enable();
        await new Promise((r) => setTimeout(r, 50));
        const t0 = performance.now();
        await f();
        const ms = performance.now() - t0;
        await new Promise((r) => setTimeout(r, 20));
        h.disable();
        return { gap: h.max / 1e6, ms };
      };
      const inline: { gap: number; ms: number }[] = [];
      const worker: { gap: number; ms: number }[] = [];
      for (let i = 0; i < 3; i++) {
        inline.push(await stall(() => trackRecord(market)));
        market.reload(market.data);
        worker.push(await stall(() => market.trackRecord()));
      }
      const g = (xs: { gap: number; ms: number }[]) => median(xs.map((v) => v.gap));
      console.log(
        `track record, first request: on the calling thread ${median(inline.map((v) => v.ms)).toFixed(0)} ms with the event loop held ${g(inline).toFixed(0)} ms; ` +
          `in the worker ${median(worker.map((v) => v.ms)).toFixed(0)} ms with the longest event-loop delay ${g(worker).toFixed(0)} ms ` +
          `(${(g(worker) / g(inline)).toFixed(3)}x the calling thread's; medians of 3)`,
      );
    }

    if (want('flush')) {
      // The usage-flush figures (bench/usage-flush.ts, `benchUsageFlush()`), when that file exists.
      const file = path.join(ROOT_DIR, 'bench', 'usage-flush.ts');
      if (existsSync(file)) {
        const mod = (await import(pathToFileURL(file).href)) as { benchUsageFlush?: () => Promise<unknown> };
        if (mod.benchUsageFlush) await mod.benchUsageFlush();
      } else console.log('usage flush: SKIPPED, no bench/usage-flush.ts');
    }

    if (serviceRss.length > 0) {
      console.log('service peak RSS (VmHWM) per process, MB (target < 512 MB in every run):');
      for (const r of serviceRss) console.log(`  ${r.run}: ${r.mb.toFixed(0)} MB`);
      const worst = serviceRss.reduce((a, b) => (b.mb > a.mb ? b : a));
      verdict('peak RSS, every service run', `max ${worst.mb.toFixed(0)} MB (${worst.run})`, '< 512 MB', worst.mb < 512);
    }
  } finally {
    for (const s of running) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }

  const speedAfter = speedBefore && verdicts.length > 0 ? coreSpeed() : null;
  if (verdicts.length > 0) {
    console.log(
      `\nMust show (issue #13), ${CONNECTIONS} connections, ${DURATION} s runs; load average at the end ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}:`,
    );
    if (speedBefore && speedAfter) speedWarning(speedBefore, speedAfter);
    const w = Math.max(...verdicts.map((v) => v.what.length));
    const f = Math.max(...verdicts.map((v) => v.figure.length));
    for (const v of verdicts)
      console.log(
        `  ${v.what.padEnd(w)}  ${v.figure.padEnd(f)}  target ${v.target.padEnd(10)} met: ${v.met === null ? 'n/a' : v.met ? 'yes' : 'NO'}`,
      );
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
