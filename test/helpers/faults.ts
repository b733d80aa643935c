import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';

/**
 * Private dependency servers for fault tests (test/faults/): a redis-server or a PostgreSQL
 * cluster of the test's own on a free loopback port, in a process group of its own so that
 * `stall()` can SIGSTOP every process of it and `resume()` SIGCONT them. `stop()` resumes and
 * kills the group and removes its files; it also runs at process exit should a test crash.
 * The shared servers (127.0.0.1:5432, :6379) are never touched.
 */
export interface PrivateServer {
  /** Connection URL, e.g. redis://127.0.0.1:40123 or postgres://postgres@127.0.0.1:40124/postgres. */
  url: string;
  /** SIGSTOP to every process of the server: it keeps its sockets but answers nothing. */
  stall(): void;
  /** SIGCONT to every process of the server. */
  resume(): void;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function which(bin: string): string | null {
  try {
    return execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

const PG_BIN = '/usr/lib/postgresql/15/bin';

/** Why a private server of `kind` cannot be started here (a SKIPPED message), or null. */
export function privateServerUnavailable(kind: 'redis' | 'postgres'): string | null {
  if (kind === 'redis') return which('redis-server') ? null : 'SKIPPED: redis-server is not installed';
  if (!existsSync(path.join(PG_BIN, 'postgres'))) return `SKIPPED: PostgreSQL binaries not found in ${PG_BIN}`;
  if (process.getuid?.() === 0 && !which('runuser')) return 'SKIPPED: running as root without runuser (PostgreSQL refuses root)';
  return null;
}

/**
 * Signals for the process group of `child` (spawned detached, so it leads a group of its
 * own) and for the processes `morePids()` names (PostgreSQL's backends call setsid(): they
 * are not in the postmaster's group).
 */
function group(child: ChildProcess, cleanup: () => void, morePids: () => number[] = () => []): Omit<PrivateServer, 'url'> {
  const pid = child.pid!;
  let alive = true;
  child.once('exit', () => (alive = false));
  const signal = (sig: NodeJS.Signals) => {
    for (const p of [-pid, ...morePids()]) {
      try {
        process.kill(p, sig);
      } catch {
        // already gone
      }
    }
  };
  const onExit = () => {
    signal('SIGCONT');
    signal('SIGKILL');
    cleanup();
  };
  process.once('exit', onExit);
  return {
    stall: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    async stop() {
      process.off('exit', onExit);
      signal('SIGCONT');
      signal('SIGTERM');
      for (let i = 0; i < 50 && alive; i++) await sleep(100);
      if (alive) signal('SIGKILL');
      cleanup();
    },
  };
}

async function waitFor(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} did not start within ${ms} ms`);
}

/** Starts a private redis-server (no persistence) and waits (at most 10 s) until it answers PING. */
export async function startPrivateRedis(): Promise<PrivateServer> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    detached: true,
    stdio: 'ignore',
  });
  const g = group(child, () => {});
  const url = `redis://127.0.0.1:${port}`;
  try {
    await waitFor('redis-server', 10_000, async () => {
      const r = new Redis(url, { lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null });
      try {
        await r.connect();
        return (await r.ping()) === 'PONG';
      } finally {
        r.disconnect();
      }
    });
  } catch (e) {
    await g.stop();
    throw e;
  }
  return { url, ...g };
}

/**
 * Starts a private PostgreSQL 15 cluster (initdb in a temporary folder, fsync off, trust
 * authentication, as the postgres user when running as root) and waits (at most 30 s) until
 * it accepts connections; its database `postgres` is the one to use. `settings` are extra
 * server settings (`-c name=value`), e.g. `{ autovacuum: 'off' }`.
 */
export async function startPrivatePostgres(settings: Record<string, string> = {}): Promise<PrivateServer> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'faults-pg-'));
  chmodSync(dir, 0o777);
  const data = path.join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const run = (bin: string, args: string[]) =>
    (asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args]) as [string, string[]];
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const [ic, ia] = run(path.join(PG_BIN, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  execFileSync(ic, ia, { stdio: 'ignore', timeout: 60_000 });
  const [pc, pa] = run(path.join(PG_BIN, 'postgres'), [
    '-D',
    data,
    '-p',
    String(port),
    '-k',
    dir,
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'fsync=off',
    '-c',
    'shared_buffers=16MB',
    ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
  ]);
  const child = spawn(pc, pa, { detached: true, stdio: 'ignore' });
  // The postmaster's children (backends, checkpointer, ...), from /proc.
  const backends = () => {
    try {
      const postmaster = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
            const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
            return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
          } catch {
            return false;
          }
        })
        .map(Number);
    } catch {
      return [];
    }
  };
  const g = group(child, cleanup, backends);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  try {
    await waitFor('postgres', 30_000, async () => {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
      try {
        await c.connect();
        await c.query('select 1');
        return true;
      } finally {
        await c.end().catch(() => {});
      }
    });
  } catch (e) {
    await g.stop();
    throw e;
  }
  return { url, ...g };
}

/** One timed request: its status (0 when it did not answer within the bound) and its duration, ms. */
export interface Timed {
  label: string;
  status: number;
  ms: number;
  /** When it was sent, relative to the start of the run, ms. */
  at: number;
}

/** The p-th percentile (0..100) of `xs` (nearest rank). */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/**
 * Runs `loops` concurrently for `durationMs`, each sending one request after the other with
 * `pauseMs` between them; each request is bounded by `boundMs` (one that does not answer in
 * time is recorded with status 0). Loopback only; at most durationMs / pauseMs requests per loop.
 */
export async function timedLoad(
  loops: { label: string; send: () => Promise<number> }[],
  durationMs: number,
  pauseMs: number,
  boundMs: number,
): Promise<Timed[]> {
  const out: Timed[] = [];
  const t0 = performance.now();
  await Promise.all(
    loops.map(async (l) => {
      while (performance.now() - t0 < durationMs) {
        const start = performance.now();
        let timer: NodeJS.Timeout | undefined;
        const status = await Promise.race([
          l.send().catch(() => -1),
          new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), boundMs))),
        ]);
        clearTimeout(timer);
        out.push({ label: l.label, status, ms: performance.now() - start, at: start - t0 });
        await sleep(pauseMs);
      }
    }),
  );
  return out;
}
