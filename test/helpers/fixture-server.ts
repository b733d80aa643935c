/**
 * A scriptable HTTP server on 127.0.0.1 (random port) for the adapter tests: each request is
 * answered by the next scripted reply (or the default one), and every request is logged.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';

/** One answer: a status (200), headers, a body (string or JSON), or 'hang' (never answers). */
export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: unknown;
  hang?: boolean;
}

/** A logged request. */
export interface Logged {
  method: string;
  url: URL;
  body: unknown;
  at: number;
}

/** The text of a fixture under data/fixtures. */
export function fixture(rel: string): string {
  return readFileSync(path.join(ROOT_DIR, 'data', 'fixtures', rel), 'utf8');
}

/** A fixture parsed as JSON. */
export function fixtureJson<T = unknown>(rel: string): T {
  return JSON.parse(fixture(rel)) as T;
}

/**
 * Starts the server. `route` answers a request when no scripted reply is queued;
 * `script(...replies)` queues replies used first, in order.
 */
export async function startFixtureServer(route: (req: Logged) => Reply = () => ({ status: 404, body: 'no route' })) {
  const log: Logged[] = [];
  const queue: Reply[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = undefined;
      if (text) {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      const entry = { method: req.method ?? 'GET', url: new URL(req.url ?? '/', 'http://127.0.0.1'), body, at: Date.now() };
      log.push(entry);
      const r = queue.shift() ?? route(entry);
      if (r.hang) return;
      res.writeHead(r.status ?? 200, { 'content-type': 'application/json', ...r.headers });
      res.end(typeof r.body === 'string' ? r.body : JSON.stringify(r.body ?? null));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    log,
    script(...replies: Reply[]) {
      queue.push(...replies);
    },
    close(): Promise<void> {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
