// Shared machinery of `npm run bench` (bench/run.ts): how servers are started (pinned to one
// core), how load is generated (wrk in its own process, pinned to the other core, with a Lua
// script rotating the Authorization header over a key pool), and what is measured per run
// (throughput, p99, server CPU µs per request from /proc/<pid>/stat).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import path from 'node:path';
import { ROOT_DIR } from '../src/config.ts';
import { scriptNodeOptions } from '../scripts/node-options.ts';

/** Seconds of each measured wrk run (BENCH_SECONDS, default 10). */
export const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
/** Seconds of the unmeasured wrk run before each measured one (BENCH_WARMUP_SECONDS, default 2). */
export const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
/** Open connections of every wrk run (BENCH_CONNECTIONS, default 32). */
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Interleaved rounds per section (BENCH_ROUNDS, default 3); medians over the rounds are reported. */
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Whether to pin (BENCH_PIN=0 turns it off, e.g. on a one-core machine). */
const PIN = process.env.BENCH_PIN !== '0' && existsSync('/usr/bin/taskset');
/** Core of the load generator and core of the server under test (BENCH_LOAD_CPU, BENCH_SERVER_CPU). */
const LOAD_CPU = process.env.BENCH_LOAD_CPU ?? '0';
const SERVER_CPU = process.env.BENCH_SERVER_CPU ?? '1';
const WRK = process.env.BENCH_WRK ?? 'wrk';
/** Clock ticks per second of /proc/<pid>/stat's utime and stime. */
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** Throws with installation advice when wrk is missing. */
export function requireWrk(): void {
  try {
    execFileSync(WRK, ['--version'], { stdio: 'ignore' });
  } catch (e) {
    // wrk --version exits 1 after printing its banner; only a missing binary is an error.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error('wrk is not installed: `apt-get install wrk` (Debian/Ubuntu) or build it from https://github.com/wg/wrk', {
        cause: e,
      });
  }
}

/** A one-line description of the method, for the bench's header. */
export function methodLine(): string {
  const pin = PIN ? `wrk pinned to CPU ${LOAD_CPU}, servers to CPU ${SERVER_CPU}` : 'no pinning (BENCH_PIN=0 or no taskset)';
  return `${pin}; ${CONNECTIONS} connections, ${WARMUP}s warm-up + ${DURATION}s per run, ${ROUNDS} shuffled rounds (medians)`;
}

/** The spread of the server core's speed over a few seconds (`coreSpeed`). */
export interface CoreSpeed {
  /** Milliseconds of each timed pass of the same fixed loop, in order. */
  samples: number[];
  fastest: number;
  median: number;
  slowest: number;
  /** slowest / fastest: 1 on a core whose speed holds still. */
  spread: number;
}

/** The fixed loop of `coreSpeed`: integer work only (no allocation, no GC), the same every pass. */
const SPEED_PROBE = `
const n = Number(process.argv[1]), iters = Number(process.argv[2]), out = [];
let x = 0;
for (let s = -1; s < n; s++) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) x = (x + (i & 7)) | 0;
  if (s >= 0) out.push(Number(process.hrtime.bigint() - t) / 1e6);
}
console.log(JSON.stringify({ out, x }));
`;

/**
 * Times `passes` passes of one fixed integer loop on the server core (pinned as the servers
 * are; the first pass, which compiles the loop, is not counted). On a steady core the passes
 * take the same time; on this project's 2-vCPU machine they took 182-424 ms for the same
 * loop within 15 s with no steal time reported, so two runs seconds apart can differ by that
 * factor whatever the servers do. Printed at the start and the end of `npm run bench` beside
 * the verdicts.
 */
export function coreSpeed(passes = 25, iters = 200_000_000): CoreSpeed {
  const argv = [process.execPath, '-e', SPEED_PROBE, String(passes), String(iters)];
  const cmd = PIN ? ['taskset', '-c', SERVER_CPU, ...argv] : argv;
  const out = execFileSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', timeout: 120_000 });
  const samples = (JSON.parse(out) as { out: number[] }).out;
  const sorted = [...samples].sort((a, b) => a - b);
  const fastest = sorted[0]!;
  const slowest = sorted[sorted.length - 1]!;
  return { samples, fastest, median: median(samples), slowest, spread: slowest / fastest };
}

/** One line for `coreSpeed`'s result. */
export function coreSpeedLine(when: string, c: CoreSpeed): string {
  return (
    `server core speed ${when} (${c.samples.length} passes of one fixed loop${PIN ? `, pinned to CPU ${SERVER_CPU}` : ''}): ` +
    `fastest ${c.fastest.toFixed(0)} ms, median ${c.median.toFixed(0)} ms, slowest ${c.slowest.toFixed(0)} ms, slowest / fastest ${c.spread.toFixed(2)}x`
  );
}

/** A free loopback port (the OS picks it; released before the server binds it). */
export function freePort(): Promise<number> {
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
 * How the service is started: `node <npm start's node options> dist/cli.js serve` when the
 * compiled JavaScript exists (production, as `npm start`), else `node --import tsx src/cli.ts
 * serve`. `sub` replaces `serve` (e.g. `mcp --stdio`, started as `npm run cli` does, with
 * its node options instead of npm start's). Returns the argv (first element: the node binary).
 */
export function serviceCommand(...sub: string[]): string[] {
  return serviceCommandAt(ROOT_DIR, ...sub);
}

/**
 * `serviceCommand` for the checkout at `root` (its own package.json scripts and dist/; the
 * script path absolute when `root` is not this checkout, since servers run in this one).
 */
export function serviceCommandAt(root: string, ...sub: string[]): string[] {
  if (sub.length === 0) sub = ['serve'];
  const extra = [
    ...scriptNodeOptions(sub[0] === 'serve' ? 'start' : 'cli', root),
    ...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []),
  ];
  const at = (f: string) => (root === ROOT_DIR ? f : path.join(root, f));
  return existsSync(path.join(root, 'dist', 'cli.js'))
    ? [process.execPath, ...extra, at('dist/cli.js'), ...sub]
    : [process.execPath, ...extra, '--import', 'tsx', at('src/cli.ts'), ...sub];
}

/** `node --import tsx <script> ...args` for the bench's own servers (bare, peer). */
export function scriptCommand(script: string, ...args: string[]): string[] {
  const extra = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  return [process.execPath, ...extra, '--import', 'tsx', script, ...args];
}

/** A server process under test. */
export interface Server {
  name: string;
  proc: ChildProcess;
  pid: number;
  port: number;
  url: string;
  /** Milliseconds from spawn to the first 200 on the ready path. */
  readyMs: number;
}

/**
 * Spawns `argv` (pinned to the server core unless `pin` is false) with PORT/HOST set to a free
 * loopback port, stdout to /dev/null, stderr inherited, and waits for a 200 on `readyPath`
 * (the service: /readyz). Throws if it exits or is not ready within `timeoutMs`.
 */
export async function startServer(
  name: string,
  argv: string[],
  o: { env?: Record<string, string>; readyPath?: string; pin?: boolean; timeoutMs?: number; port?: number } = {},
): Promise<Server> {
  const port = o.port ?? (await freePort());
  const cmd = (o.pin ?? true) && PIN ? ['taskset', '-c', SERVER_CPU, ...argv] : argv;
  const t0 = performance.now();
  const proc = spawn(cmd[0]!, cmd.slice(1), {
    cwd: ROOT_DIR,
    env: { ...process.env, HOST: '127.0.0.1', ...o.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let exited = false;
  proc.on('exit', () => (exited = true));
  const url = `http://127.0.0.1:${port}`;
  const deadline = t0 + (o.timeoutMs ?? 120_000);
  while (performance.now() < deadline) {
    if (exited) throw new Error(`${name} exited with ${proc.exitCode}`);
    try {
      const res = await fetch(`${url}${o.readyPath ?? '/'}`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200 || (o.readyPath === undefined && res.status < 500))
        return { name, proc, pid: proc.pid!, port, url, readyMs: performance.now() - t0 };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  proc.kill('SIGKILL');
  throw new Error(`${name} was not ready on ${port} within ${o.timeoutMs ?? 120_000} ms`);
}

/** Stops a server (SIGTERM, then SIGKILL after 10 s) and waits for its exit. */
export function stopServer(s: { proc: ChildProcess }): Promise<void> {
  return new Promise<void>((r) => {
    if (s.proc.exitCode !== null || s.proc.signalCode !== null) return r();
    const kill = setTimeout(() => s.proc.kill('SIGKILL'), 10_000);
    s.proc.once('exit', () => {
      clearTimeout(kill);
      r();
    });
    s.proc.kill('SIGTERM');
  });
}

/** A process's peak (VmHWM) and current (VmRSS) resident set size, MB. */
export function memMb(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  return { peak: mb('VmHWM'), now: mb('VmRSS') };
}

/**
 * Steal time of the server core (`cpu<BENCH_SERVER_CPU>` in /proc/stat when pinned; unpinned,
 * the mean over all cores), µs: time the hypervisor gave this virtual CPU's slot to something
 * else.
 */
export function stealMicros(): number {
  const name = PIN ? `cpu${SERVER_CPU}` : 'cpu';
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name} `));
  // cpuN user nice system idle iowait irq softirq steal ...
  return line ? (Number(line.trim().split(/\s+/)[8]) * 1e6) / CLK_TCK / (PIN ? 1 : cpus().length) : NaN;
}

/** CPU time (user + system, all threads) a process has used so far, microseconds. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLK_TCK;
}

/** What one request of a load looks like; the Authorization header rotates over `keysFile`. */
export interface LoadSpec {
  /** Path and query, e.g. `/api/v1/signals`. */
  path: string;
  method?: 'GET' | 'POST';
  body?: string;
  headers?: Record<string, string>;
  /** A file with one API key per line, sent as `Authorization: Bearer <key>` in rotation. */
  keysFile: string;
}

/** One wrk run's figures. */
export interface RunResult {
  requests: number;
  seconds: number;
  rps: number;
  /** Latency percentiles, ms. */
  p50: number;
  p99: number;
  /** Responses with status >= 400 (wrk's `status` errors) and socket errors. */
  non2xx: number;
  socketErrors: number;
  /** Server CPU (user + system) over the run per request served, µs; NaN without a pid. */
  cpuUs: number;
  /**
   * CPU of the contender's helper processes (`Contender.sidecars`, e.g. the Redis server its
   * rate limiter calls) over the run per request served, µs; NaN without any.
   */
  sidecarCpuUs: number;
  /**
   * Requests per second in each bucket of `bucketSeconds` wall-clock seconds (first and last,
   * partial, dropped; a bucket without a response counts as 0).
   */
  buckets: number[];
  /**
   * Per bucket (same order as `buckets`), read from /proc at the bucket's edges: the server's
   * CPU µs per request, its CPU as % of one core, and the steal time of its core (% of the
   * bucket; the time the hypervisor ran something else) when the server is pinned. A dip with
   * less server CPU or with steal is the machine; a dip at full CPU with more CPU per request
   * is work in the server or a slower core (compare with the keys10k section's bare-route
   * control). NaN where a bucket edge was not sampled.
   */
  bucketCpu: { cpuUsPerReq: number; cpuPct: number; stealPct: number }[];
}

const luaString = (s: string) => `[==[${s}]==]`;

/**
 * The wrk script: every request is pre-formatted per key in init(); request() rotates over
 * them; done() prints one JSON line (BENCH_JSON) with the totals, percentiles and, when
 * `bucketSeconds` > 0, requests per wall-clock bucket (counted in response(); each thread's
 * table is collected in done() through thread:get).
 */
function wrkScript(spec: LoadSpec, bucketSeconds: number): string {
  const headers = Object.entries(spec.headers ?? {})
    .map(([k, v]) => `[ ${luaString(k)} ] = ${luaString(v)}`)
    .join(', ');
  return `
local reqs, n, i = {}, 0, 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  for line in io.lines(${luaString(spec.keysFile)}) do
    if #line > 0 then
      local h = { ${headers} }
      h["Authorization"] = "Bearer " .. line
      n = n + 1
      reqs[n] = wrk.format(${luaString(spec.method ?? 'GET')}, ${luaString(spec.path)}, h, ${spec.body === undefined ? 'nil' : luaString(spec.body)})
    end
  end
  -- each thread starts at its own place in the pool
  i = (wrk.thread_index or 0) % n
end
function request()
  i = i % n + 1
  return reqs[i]
end
${
  bucketSeconds > 0
    ? `buckets = {}
function response(status, headers, body)
  local b = math.floor(os.time() / ${bucketSeconds})
  buckets[b] = (buckets[b] or 0) + 1
end`
    : ''
}
function done(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    local b = t:get("buckets")
    if b then for k, v in pairs(b) do all[k] = (all[k] or 0) + v end end
  end
  local keys = {}
  for k in pairs(all) do table.insert(keys, k) end
  table.sort(keys)
  local counts = {}
  -- Every slot from the second to the last but one, a slot without a single response as 0.
  if #keys >= 2 then
    for k = keys[1] + 1, keys[#keys] - 1 do table.insert(counts, tostring(all[k] or 0)) end
  end
  local e = summary.errors
  io.write(string.format('BENCH_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"status":%d,"socket":%d,"buckets":[%s],"first_bucket":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout, table.concat(counts, ","), #keys >= 2 and keys[1] + 1 or -1))
end
`;
}

/**
 * Runs wrk (one thread, `CONNECTIONS` connections, pinned to the load core) against
 * `url + spec.path` for `seconds`, measuring the CPU the server process `pid` uses meanwhile.
 * Throws when wrk fails or prints no result.
 */
export async function wrk(
  url: string,
  spec: LoadSpec,
  seconds: number,
  pid?: number,
  bucketSeconds = 0,
  sidecars: readonly number[] = [],
): Promise<RunResult> {
  const script = path.join(path.dirname(spec.keysFile), `wrk-${process.pid}-${Math.random().toString(36).slice(2)}.lua`);
  writeFileSync(script, wrkScript(spec, bucketSeconds));
  const argv = [WRK, '-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--timeout', '10s', '-s', script, `${url}${spec.path}`];
  const cmd = PIN ? ['taskset', '-c', LOAD_CPU, ...argv] : argv;
  const cpu0 = pid ? cpuMicros(pid) : NaN;
  const sidecarCpu = () => (sidecars.length ? sidecars.reduce((sum, p) => sum + cpuMicros(p), 0) : NaN);
  const side0 = sidecarCpu();
  // Server CPU and the core's steal time at every wall-clock bucket edge (the Lua script's
  // buckets are floor(os.time() / bucketSeconds), the same epoch seconds).
  const edges = new Map<number, { cpu: number; steal: number }>();
  let edgeTimer: NodeJS.Timeout | undefined;
  if (bucketSeconds > 0 && pid) {
    const sample = () => {
      const slot = Math.floor(Date.now() / 1000 / bucketSeconds);
      if (!edges.has(slot)) edges.set(slot, { cpu: cpuMicros(pid), steal: stealMicros() });
      edgeTimer = setTimeout(sample, (slot + 1) * bucketSeconds * 1000 - Date.now() + 2);
    };
    edgeTimer = setTimeout(sample, (Math.floor(Date.now() / 1000 / bucketSeconds) + 1) * bucketSeconds * 1000 - Date.now() + 2);
  }
  let out: string;
  try {
    out = await new Promise<string>((resolve, reject) => {
      const p = spawn(cmd[0]!, cmd.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (c: Buffer) => (stdout += c));
      p.stderr.on('data', (c: Buffer) => (stderr += c));
      p.on('error', reject);
      p.on('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`wrk exited with ${code}: ${stderr}${stdout}`))));
    });
  } finally {
    // Also when wrk fails: the sampler would otherwise re-arm forever and read a stopped server.
    clearTimeout(edgeTimer);
  }
  const cpu1 = pid ? cpuMicros(pid) : NaN;
  const side1 = sidecarCpu();
  const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (!line) throw new Error(`wrk printed no result:\n${out}`);
  const j = JSON.parse(line.slice('BENCH_JSON '.length)) as {
    requests: number;
    duration_us: number;
    p50_us: number;
    p99_us: number;
    status: number;
    socket: number;
    buckets: number[];
    first_bucket?: number;
  };
  const secs = j.duration_us / 1e6;
  const bucketCpu = j.buckets.map((n, i) => {
    const a = edges.get((j.first_bucket ?? NaN) + i);
    const b = edges.get((j.first_bucket ?? NaN) + i + 1);
    if (!a || !b) return { cpuUsPerReq: NaN, cpuPct: NaN, stealPct: NaN };
    const us = bucketSeconds * 1e6;
    return {
      cpuUsPerReq: (b.cpu - a.cpu) / Math.max(n, 1),
      cpuPct: (100 * (b.cpu - a.cpu)) / us,
      stealPct: (100 * (b.steal - a.steal)) / us,
    };
  });
  return {
    requests: j.requests,
    seconds: secs,
    rps: j.requests / secs,
    p50: j.p50_us / 1000,
    p99: j.p99_us / 1000,
    non2xx: j.status,
    socketErrors: j.socket,
    cpuUs: (cpu1 - cpu0) / Math.max(j.requests, 1),
    sidecarCpuUs: (side1 - side0) / Math.max(j.requests, 1),
    buckets: j.buckets.map((b) => b / bucketSeconds),
    bucketCpu,
  };
}

/**
 * Sends one request per key in the pool (16 at a time), so every key has been seen (and
 * cached) before anything is measured. Throws on a non-2xx answer (a key the server refuses).
 */
export async function warmKeys(url: string, spec: LoadSpec, keys: string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < keys.length) {
      const key = keys[next++]!;
      const res = await fetch(`${url}${spec.path}`, {
        method: spec.method ?? 'GET',
        headers: { ...spec.headers, authorization: `Bearer ${key}` },
        body: spec.body,
      });
      await res.arrayBuffer();
      if (res.status >= 300) throw new Error(`warm-up: ${url}${spec.path} answered ${res.status} for a pool key`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

/** Median of a non-empty list (the mean of the two middle values for even lengths). */
export function median(xs: number[]): number {
  const a = [...xs].sort((p, q) => p - q);
  const m = Math.floor(a.length / 2);
  return a.length % 2 === 1 ? a[m]! : (a[m - 1]! + a[m]!) / 2;
}

/** A shuffled copy (Fisher–Yates, Math.random). */
export function shuffle<T>(xs: readonly T[]): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

/**
 * The throughput ratio `a / b` of each round (the two runs of a round are seconds apart, so a
 * machine that speeds up or slows down over the comparison moves both), as
 * "per round lo-hi (median m)". Printed beside the ratio of the medians, which the verdicts use.
 */
export function perRound(m: Map<string, Medians>, a: string, b: string): string {
  const ra = m.get(a)!.runs;
  const rb = m.get(b)!.runs;
  const rs = ra.map((r, i) => r.rps / rb[i]!.rps).sort((p, q) => p - q);
  return `per round ${rs[0]!.toFixed(2)}-${rs[rs.length - 1]!.toFixed(2)}x (median ${median(rs).toFixed(2)}x)`;
}

/** The sidecars' CPU per request as printed after a server's (`+ Redis N µs/req`), or '' without sidecars (NaN). */
export function sidecarText(us: number): string {
  return Number.isFinite(us) ? ` + Redis ${us.toFixed(0).padStart(4)} µs/req` : '';
}

/** One line of a run's figures. */
export function runLine(name: string, r: RunResult): string {
  const warn = r.non2xx + r.socketErrors > 0 ? `  WARNING: ${r.non2xx} non-2xx, ${r.socketErrors} socket errors` : '';
  const side = sidecarText(r.sidecarCpuUs);
  return `${name.padEnd(40)} ${r.rps.toFixed(0).padStart(7)} req/s  p99 ${r.p99.toFixed(1).padStart(6)} ms  CPU ${r.cpuUs.toFixed(0).padStart(5)} µs/req${side}${warn}`;
}

/** A contender of an interleaved comparison: a running server and the load it gets. */
export interface Contender {
  name: string;
  server: Server;
  spec: LoadSpec;
  /** Pids of processes doing this contender's work beside the server (its Redis): their CPU is reported per request too. */
  sidecars?: number[];
}

/** Medians of a contender over the rounds. */
export interface Medians {
  rps: number;
  p99: number;
  cpuUs: number;
  /** Median CPU µs per request of the contender's sidecars (NaN without). */
  sidecarCpuUs: number;
  runs: RunResult[];
}

/**
 * Interleaved rounds: in each of `o.rounds` (default `ROUNDS`) rounds every contender gets a
 * warm-up run and a measured run of `o.seconds` (default `DURATION`), in a fresh random order;
 * prints each run and returns the medians by name.
 */
export async function interleave(
  section: string,
  contenders: Contender[],
  o: { rounds?: number; seconds?: number } = {},
): Promise<Map<string, Medians>> {
  const runs = new Map<string, RunResult[]>(contenders.map((c) => [c.name, []]));
  for (let round = 1; round <= (o.rounds ?? ROUNDS); round++) {
    for (const c of shuffle(contenders)) {
      if (WARMUP > 0) await wrk(c.server.url, c.spec, WARMUP);
      const r = await wrk(c.server.url, c.spec, o.seconds ?? DURATION, c.server.pid, 0, c.sidecars);
      runs.get(c.name)!.push(r);
      console.log(`  [${section} round ${round}] ${runLine(c.name, r)}`);
    }
  }
  const out = new Map<string, Medians>();
  for (const [name, rs] of runs) {
    out.set(name, {
      rps: median(rs.map((r) => r.rps)),
      p99: median(rs.map((r) => r.p99)),
      cpuUs: median(rs.map((r) => r.cpuUs)),
      sidecarCpuUs: median(rs.map((r) => r.sidecarCpuUs)),
      runs: rs,
    });
  }
  return out;
}
