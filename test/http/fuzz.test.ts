import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { ErrorEnvelopeSchema } from '../../src/http/envelope.ts';
import { harnessUnavailable, startHarness, type Harness } from '../helpers/harness.ts';

/**
 * Fuzz of the HTTP edge: 2,000 malformed requests on raw loopback sockets (node:net, so the
 * bytes reach the server exactly as written: bad percent-encodings, over-long path
 * parameters, control bytes, 70 KB headers, HEAD). Every answer must be the error envelope
 * with `X-Request-Id` (equal to `meta.request_id`) and the rate-limit headers, never a 500 and
 * never Fastify's `{"error","message","statusCode"}`. Bounded: 2,000 requests, 16 at a time,
 * 5 s per socket.
 */

const SKIP = (await harnessUnavailable()) ?? undefined;
let h: Harness;
let port = 0;

before(async () => {
  if (SKIP) return;
  h = await startHarness();
  port = Number(new URL(h.base).port);
});
after(async () => h?.stop());

const RATE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-service-tier', 'ratelimit', 'ratelimit-policy'];

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends `bytes` on a new socket and reads the response until the server closes (at most 5 s). */
function rawRequest(bytes: Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.setTimeout(5000, () => socket.destroy(new Error('timeout')));
    socket.on('data', (c) => chunks.push(c));
    // The server may close while we are still writing a huge header: what it sent still counts.
    socket.on('error', (e) => (chunks.length ? finish() : reject(e)));
    socket.on('close', finish);
    socket.write(bytes, () => socket.end());
    let done = false;
    function finish() {
      if (done) return;
      done = true;
      const text = Buffer.concat(chunks).toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      if (head < 0)
        return reject(
          new Error(`no complete response to ${JSON.stringify(bytes.toString('latin1').slice(0, 120))}: ${JSON.stringify(text)}`),
        );
      const [statusLine, ...lines] = text.slice(0, head).split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(':');
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      let body = text.slice(head + 4);
      if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = dechunk(body);
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body });
    }
  });
}

function dechunk(s: string): string {
  let out = '';
  for (let i = 0; ;) {
    const eol = s.indexOf('\r\n', i);
    if (eol < 0) return out;
    const n = parseInt(s.slice(i, eol), 16);
    if (!n) return out;
    out += s.slice(eol + 2, eol + 2 + n);
    i = eol + 2 + n + 2;
  }
}

/** A deterministic pseudo-random generator (the run is reproducible). */
function rng(seed: number) {
  let x = seed;
  return (n: number) => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return x % n;
  };
}

const PATHS = [
  '/api/v1/signals',
  '/api/v1/signals/',
  '/api/v1/chain-health/',
  '/api/v1/chain-metrics/',
  '/api/v1/thesis/',
  '/api/v1/nope/',
];
const BAD_ENCODINGS = ['%', '%E', '%ZZ', '%E0%A4%A', '%C3%28', '%ED%A0%80', '%FF%FE', 'a%', '%%', '%u00e9'];
const CONTROL = ['\x00', '\x01', '\x07', '\x08', '\x0b', '\x0c', '\x1b', '\x7f'];

/** One malformed request of kind `k`, varied by `r`. */
function malformed(k: number, r: (n: number) => number): { name: string; bytes: Buffer; head: boolean } {
  const path = PATHS[r(PATHS.length)]!;
  const method = r(4) === 0 ? 'HEAD' : 'GET';
  const req = (line: string, headers: string[] = []) =>
    Buffer.from(`${line}\r\nHost: 127.0.0.1\r\n${headers.map((x) => `${x}\r\n`).join('')}Connection: close\r\n\r\n`, 'latin1');
  switch (k) {
    case 0: {
      const bad = BAD_ENCODINGS[r(BAD_ENCODINGS.length)]!;
      return { name: `bad encoding ${bad}`, bytes: req(`${method} ${path.replace(/\/$/, '')}/${bad} HTTP/1.1`), head: method === 'HEAD' };
    }
    case 1: {
      const n = 101 + r(4000);
      return { name: `long param ${n}`, bytes: req(`${method} /api/v1/signals/${'a'.repeat(n)} HTTP/1.1`), head: method === 'HEAD' };
    }
    case 2: {
      const c = CONTROL[r(CONTROL.length)]!;
      return { name: `control byte ${c.charCodeAt(0)} in a header`, bytes: req(`GET ${path} HTTP/1.1`, [`X-Fuzz: a${c}b`]), head: false };
    }
    case 3: {
      const kb = 17 + r(60);
      return { name: `${kb} KB header`, bytes: req(`GET ${path} HTTP/1.1`, [`X-Big: ${'x'.repeat(kb * 1024)}`]), head: false };
    }
    case 4: {
      const c = CONTROL[r(CONTROL.length)]!;
      return { name: `control byte ${c.charCodeAt(0)} in the path`, bytes: req(`GET ${path}a${c}b HTTP/1.1`), head: false };
    }
    case 5: {
      const c = CONTROL[r(CONTROL.length)]!;
      return { name: `control byte ${c.charCodeAt(0)} in a header name`, bytes: req(`GET ${path} HTTP/1.1`, [`X-F${c}z: 1`]), head: false };
    }
    case 6:
      return {
        name: 'bad Content-Length',
        bytes: req(`POST /api/v1/thesis HTTP/1.1`, [`Content-Length: 1${'x'.repeat(r(5) + 1)}`]),
        head: false,
      };
    default: {
      const bad = BAD_ENCODINGS[r(BAD_ENCODINGS.length)]!;
      return { name: `HEAD bad encoding ${bad}`, bytes: req(`HEAD /api/v1/signals/${bad}${'b'.repeat(r(300))} HTTP/1.1`), head: true };
    }
  }
}

test(
  '2,000 malformed requests: every answer is the envelope with X-Request-Id and the rate-limit headers',
  { skip: SKIP, timeout: 300_000 },
  async () => {
    const TOTAL = 2000;
    const CONCURRENCY = 16;
    const r = rng(42);
    const cases = Array.from({ length: TOTAL }, (_, i) => malformed(i % 8, r));
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    const t0 = performance.now();
    let next = 0;
    async function worker() {
      while (next < cases.length) {
        const c = cases[next++]!;
        let res: RawResponse;
        try {
          res = await rawRequest(c.bytes);
        } catch (e) {
          failures.push(`${c.name}: ${(e as Error).message}`);
          continue;
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const problems: string[] = [];
        if (res.status < 400 || res.status >= 500) problems.push(`status ${res.status}`);
        const id = res.headers['x-request-id'];
        if (!id) problems.push('no X-Request-Id');
        for (const name of RATE_HEADERS) if (!res.headers[name]) problems.push(`no ${name}`);
        if (!(res.headers['content-type'] ?? '').startsWith('application/json'))
          problems.push(`content-type ${res.headers['content-type']}`);
        if (!c.head) {
          try {
            const body = ErrorEnvelopeSchema.parse(JSON.parse(res.body));
            if (body.meta.request_id !== id) problems.push('meta.request_id differs from X-Request-Id');
          } catch {
            problems.push(`not the envelope: ${res.body.slice(0, 120)}`);
          }
        } else if (res.body.length) problems.push('HEAD answered with a body');
        if (problems.length) failures.push(`${c.name} -> ${res.status}: ${problems.join(', ')}`);
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    console.log(`statuses: ${JSON.stringify(Object.fromEntries(statuses))}`);
    console.log(`${TOTAL} malformed requests in ${Math.round(performance.now() - t0)} ms`);
    const kinds = new Map<string, number>();
    for (const f of failures) kinds.set(f.replace(/\d+/g, 'N'), (kinds.get(f.replace(/\d+/g, 'N')) ?? 0) + 1);
    assert.equal(failures.length, 0, `${failures.length} of ${TOTAL} failed:\n${[...kinds].map(([k, n]) => `${n}x ${k}`).join('\n')}`);
  },
);
