import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ContextGate } from '../../src/auth/context-gate.ts';

// The embedded identity provider must not leave the process tracking promises after a
// sign-in (issue 13 item 5): better-auth's AsyncLocalStorages switched the async hooks on for
// good, so every later keyed request paid for them. Structural checks, no timing. node:test's
// harness keeps an async hook of its own on in this process, so the probe runs in a child
// process (test/helpers/identity-probe.ts).

const execFileP = promisify(execFile);

test('after sign-up, sign-in, a JWT, a key and keyed requests, the process tracks no promises (own process, real service)', async () => {
  const { stdout } = await execFileP(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('../helpers/identity-probe.ts', import.meta.url))],
    {
      timeout: 240_000,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const out = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
    probes: Record<string, boolean>;
    statuses: Record<string, number>;
    storages: number;
    email: string;
  };
  // The probe works: a plain enabled AsyncLocalStorage shows (Node 20/22; Node 24's AsyncContextFrame has no promise hooks).
  const major = Number(process.versions.node.split('.')[0]);
  assert.equal(out.probes['clean process'], false);
  assert.equal(out.probes['plain storage enabled'], major < 24);
  assert.equal(out.probes['plain storage disabled'], false);
  assert.deepEqual(out.statuses, { signUp: 200, signIn: 200, token: 200, createKey: 201, keyed: 200, concurrent: 200 });
  assert.match(out.email, /^hot\./);
  // better-auth did create its storages (otherwise this proves nothing) ...
  assert.ok(out.storages >= 2, `better-auth storages: ${out.storages}`);
  // ... and none of them (nor ours) is left on.
  for (const step of ['service started', 'after sign-in', 'after a JWT request', 'after keyed requests', 'after concurrent identity calls'])
    assert.equal(out.probes[step], false, `promise hooks on ${step}`);
});

test('ContextGate: storages stay on until the last call in flight settles, then go off', async () => {
  const als = new AsyncLocalStorage<string>();
  let switchOffs = 0;
  const gate = new ContextGate(() => [als, { disable: () => (switchOffs += 1) }]);
  let releaseA!: () => void;
  const a = gate.run(() =>
    als.run('a', async () => {
      await new Promise<void>((r) => (releaseA = r));
      await tick();
      return als.getStore();
    }),
  );
  const b = gate.run(() =>
    als.run('b', async () => {
      await tick();
      return als.getStore();
    }),
  );
  assert.equal(await b, 'b');
  assert.equal(gate.active, 1, 'a is still in flight');
  assert.equal(switchOffs, 0, 'nothing switched off while a is in flight');
  releaseA();
  assert.equal(await a, 'a', 'a keeps its store after b settled');
  assert.equal(gate.active, 0);
  assert.equal(switchOffs, 1, 'switched off once the last call settled');
  assert.equal(als.getStore(), undefined);

  // Background work counts as in flight; a rejection goes to onError and still switches off.
  let failed: unknown;
  let releaseBg!: () => void;
  gate.track(
    als.run('bg', async () => {
      await new Promise<void>((r) => (releaseBg = r));
      assert.equal(als.getStore(), 'bg');
      throw new Error('boom');
    }),
    (e) => (failed = e),
  );
  assert.equal(gate.active, 1);
  releaseBg();
  while (gate.active > 0) await tick();
  await tick();
  assert.equal((failed as Error).message, 'boom');
  assert.equal(switchOffs, 2);
});
