// A section of `npm run bench` (issue 13 item 5), also runnable alone:
//   node --import tsx bench/identity-idle.ts [seconds]
// Whether a sign-in through the embedded identity provider slows what follows: in one run of
// the real service (in-memory PGlite, memory limiter), before and after a sign-up, sign-in and
// JWT, (1) a promise-chain microbenchmark in the server process (awaits per second) and
// (2) keyed GET /api/v1/signals driven by autocannon in a child process (its own process, so
// the load generator is not slowed by the server's hooks) over a pool of api-tier keys:
// throughput and server CPU µs per request. Ratios after/before, same run.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { pathToFileURL } from 'node:url';
import { generateKey } from '../src/auth/api-keys.ts';
import { promiseHooksActive } from '../src/auth/context-gate.ts';
import { loadConfig } from '../src/config.ts';
import { createService } from '../src/server.ts';

/** One phase's figures. */
export interface IdlePhase {
  /** Awaits per second of a promise chain in the server process (best of 5). */
  awaitsPerSec: number;
  /** Keyed requests per second (autocannon average). */
  reqPerSec: number;
  /** Server process CPU per request, µs. */
  cpuUsPerReq: number;
  /** Responses other than 200. */
  non2xx: number;
  /** Whether promise hooks were on in the server process (promiseHooksActive). */
  promiseHooks: boolean;
}

async function awaitsPerSec(): Promise<number> {
  const n = 200_000;
  let best = 0;
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    for (let i = 0; i < n; i++) await Promise.resolve(i);
    best = Math.max(best, n / ((performance.now() - t) / 1000));
  }
  return best;
}

/** autocannon in a child process: GET `url` for `seconds`, rotating `keys` as Bearer tokens. */
function load(url: string, keys: string[], seconds: number): Promise<{ requests: { average: number }; non2xx: number; '2xx': number }> {
  const code = `
    import autocannon from 'autocannon';
    const keys = ${JSON.stringify(keys)};
    let i = 0;
    const r = await autocannon({ url: ${JSON.stringify(url)}, connections: 10, duration: ${seconds},
      requests: [{ setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: 'Bearer ' + keys[i++ % keys.length] } }) }] });
    process.stdout.write(JSON.stringify({ requests: r.requests, non2xx: r.non2xx, '2xx': r['2xx'] }));`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('exit', (status) => (status === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load generator exited ${status}`))));
  });
}

/**
 * Runs the service, measures `rounds` phases before a sign-in and `rounds` after it (each
 * `seconds` of load), prints one line with the medians and ratios, returns the phases.
 */
export async function benchIdentityIdle(
  opts: { seconds?: number; rounds?: number; signIn?: boolean } = {},
): Promise<{ before: IdlePhase[]; after: IdlePhase[] }> {
  const seconds = opts.seconds ?? 5;
  const rounds = opts.rounds ?? 3;
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  const svc = await createService(loadConfig({ PGLITE_DIR: 'memory://', LOG_LEVEL: 'silent', PORT: String(port), HOST: '127.0.0.1' }), {
    publicUrl: base,
  });
  await svc.app.listen({ port, host: '127.0.0.1' });
  try {
    // 500 api-tier keys (500 requests per minute each, 250,000 a minute in all), 5 per user.
    const keys: string[] = [];
    for (let u = 0; u < 100; u++) {
      const email = `idle-${u}@bench.example`;
      const user = await svc.repos.users.ensureUser(`idle-${u}`, email);
      await svc.repos.users.setTierByEmail(email, 'api');
      for (let k = 0; k < 5; k++) {
        const g = generateKey();
        await svc.repos.keys.createKey(user.id, 'bench', g.prefix, g.hash, 5);
        keys.push(g.key);
      }
    }
    const url = `${base}/api/v1/signals`;
    await load(url, keys, 5); // warm-up
    // Start-up work (backfill, answer cache) must be over: wait for a quiet half-second (at most 30 s).
    for (let i = 0; i < 60; i++) {
      const c0 = process.cpuUsage();
      await new Promise((r) => setTimeout(r, 500));
      const c = process.cpuUsage(c0);
      if (c.user + c.system < 50_000) break;
    }
    const phase = async (): Promise<IdlePhase> => {
      const promiseHooks = await promiseHooksActive();
      const aps = await awaitsPerSec();
      const c0 = process.cpuUsage();
      const r = await load(url, keys, seconds);
      const c = process.cpuUsage(c0);
      const n = r['2xx'] + r.non2xx;
      return { awaitsPerSec: aps, reqPerSec: r.requests.average, cpuUsPerReq: (c.user + c.system) / n, non2xx: r.non2xx, promiseHooks };
    };
    const before: IdlePhase[] = [];
    for (let i = 0; i < rounds; i++) before.push(await phase());

    const post = (path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: base },
        body: JSON.stringify(body),
      });
    if (opts.signIn !== false) {
      const cred = { email: 'idle-signin@bench.example', password: 'correct horse battery staple' };
      await (await post('/auth/sign-up/email', { name: 'Idle', ...cred })).arrayBuffer();
      const signIn = await post('/auth/sign-in/email', cred);
      if (signIn.status !== 200) throw new Error(`sign-in answered ${signIn.status}`);
      const token = await fetch(`${base}/auth/token`, { headers: { authorization: `Bearer ${signIn.headers.get('set-auth-token')}` } });
      if (token.status !== 200) throw new Error(`token answered ${token.status}`);
      await token.arrayBuffer();
    }

    const after: IdlePhase[] = [];
    for (let i = 0; i < rounds; i++) after.push(await phase());

    const med = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    const m = (ps: IdlePhase[], k: 'awaitsPerSec' | 'reqPerSec' | 'cpuUsPerReq') => med(ps.map((p) => p[k]));
    console.log(
      `${opts.signIn === false ? 'control, no sign-in: later vs earlier' : 'after a sign-in vs before'} (same run, median of ${rounds} x ${seconds} s): promise chain ${(m(before, 'awaitsPerSec') / 1e6).toFixed(2)} -> ` +
        `${(m(after, 'awaitsPerSec') / 1e6).toFixed(2)} M awaits/s (${(m(after, 'awaitsPerSec') / m(before, 'awaitsPerSec')).toFixed(2)}x); ` +
        `keyed GET /api/v1/signals ${m(before, 'reqPerSec').toFixed(0)} -> ${m(after, 'reqPerSec').toFixed(0)} req/s ` +
        `(${(m(after, 'reqPerSec') / m(before, 'reqPerSec')).toFixed(2)}x), server CPU ${m(before, 'cpuUsPerReq').toFixed(0)} -> ` +
        `${m(after, 'cpuUsPerReq').toFixed(0)} µs/request (${(m(after, 'cpuUsPerReq') / m(before, 'cpuUsPerReq')).toFixed(2)}x); ` +
        `non-200 ${before.reduce((a, p) => a + p.non2xx, 0)} -> ${after.reduce((a, p) => a + p.non2xx, 0)}; promise hooks after the sign-in: ${after.some((p) => p.promiseHooks) ? 'ON' : 'off'}`,
    );
    return { before, after };
  } finally {
    await svc.stop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // `node --import tsx bench/identity-idle.ts 5 control`: the same phases without the sign-in (a control for drift over the run).
  const out = await benchIdentityIdle({ seconds: Number(process.argv[2]) || undefined, signIn: process.argv[3] !== 'control' });
  console.log(JSON.stringify(out));
}
