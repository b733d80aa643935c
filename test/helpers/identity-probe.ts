// Run as its own process (node --import tsx test/helpers/identity-probe.ts) by
// test/auth/identity-hot-path.test.ts: node:test's harness keeps an async hook of its own
// enabled in every test process, so whether the service leaves promise hooks on can only be
// seen outside it. Starts the real service (in-memory PGlite, embedded identity provider),
// goes through sign-up, sign-in, a JWT, a key and keyed requests, and prints one JSON line:
// the probe (promiseHooksActive) after each step, the HTTP statuses, and how many storages
// better-auth created.
import { AsyncLocalStorage } from 'node:async_hooks';
import net from 'node:net';
import { betterAuthStorages, promiseHooksActive } from '../../src/auth/context-gate.ts';
import { createService } from '../../src/server.ts';
import { testConfig } from './env.ts';

const out: { probes: Record<string, boolean>; statuses: Record<string, number>; storages: number; email?: string } = {
  probes: {},
  statuses: {},
  storages: 0,
};
const probe = async (step: string) => void (out.probes[step] = await promiseHooksActive());

// The probe itself: off, on while a plain AsyncLocalStorage is enabled (Node 20/22), off again.
await probe('clean process');
const als = new AsyncLocalStorage<number>();
await als.run(1, async () => void (await null));
await probe('plain storage enabled');
als.disable();
await probe('plain storage disabled');

const srv = net.createServer();
await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
const { port } = srv.address() as net.AddressInfo;
await new Promise<void>((r) => srv.close(() => r()));
const base = `http://127.0.0.1:${port}`;
const svc = await createService(testConfig({ PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'silent' }), { publicUrl: base });
await svc.app.listen({ port, host: '127.0.0.1' });
try {
  await probe('service started');
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: base, ...headers },
      body: JSON.stringify(body),
    });
  const email = `hot.${Date.now()}@example.com`;
  const password = 'correct horse battery staple';
  out.statuses.signUp = (await post('/auth/sign-up/email', { name: 'Hot', email, password })).status;
  const signIn = await post('/auth/sign-in/email', { email, password });
  out.statuses.signIn = signIn.status;
  await signIn.arrayBuffer();
  out.storages = betterAuthStorages().length;
  await probe('after sign-in');
  const session = signIn.headers.get('set-auth-token') ?? '';
  const token = await fetch(`${base}/auth/token`, { headers: { authorization: `Bearer ${session}` } });
  out.statuses.token = token.status;
  const jwt = ((await token.json()) as { token: string }).token;
  const created = await post('/api/v1/keys/create', { name: 'hot' }, { authorization: `Bearer ${jwt}` });
  out.statuses.createKey = created.status;
  const key = ((await created.json()) as { data: { key: string } }).data.key;
  await probe('after a JWT request');
  const signals = await fetch(`${base}/api/v1/signals`, { headers: { authorization: `Bearer ${key}` } });
  out.statuses.keyed = signals.status;
  await signals.arrayBuffer();
  await probe('after keyed requests');
  // Concurrent identity calls: each keeps its context; off once the last one settled.
  const all = await Promise.all([
    fetch(`${base}/auth/get-session`, { headers: { authorization: `Bearer ${session}` } }),
    fetch(`${base}/auth/token`, { headers: { authorization: `Bearer ${session}` } }),
    fetch(`${base}/auth/jwks`),
  ]);
  out.statuses.concurrent = all.every((r) => r.status === 200) ? 200 : Math.max(...all.map((r) => r.status));
  out.email = ((await all[0]!.json()) as { user?: { email?: string } }).user?.email;
  await Promise.all(all.slice(1).map((r) => r.arrayBuffer()));
  await probe('after concurrent identity calls');
} finally {
  await svc.stop();
}
console.log(JSON.stringify(out));
