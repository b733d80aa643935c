import { executionAsyncId } from 'node:async_hooks';

/**
 * Keeps the identity provider's AsyncLocalStorage instances switched on only while identity
 * work is in flight, so that the rest of the process (the keyed API requests) does not pay
 * for them afterwards.
 *
 * Why: on Node 20 and 22, `AsyncLocalStorage#run` enables the process-wide async hook that
 * propagates stores (async_hooks `createHook({init})`, which installs V8 promise hooks): from
 * then on every promise the process creates, in any request, calls into JavaScript to get an
 * async id and a copy of the stores, until *every* storage is disabled again. better-auth
 * keeps up to three process-global storages (request state, endpoint context, adapter /
 * transaction; registered under `Symbol.for('better-auth:global')`) and never disables them,
 * so a single sign-in slowed every later promise about 4-5x (measured: keyed requests 26%
 * more CPU). Node 24 propagates stores through V8's continuation data (AsyncContextFrame)
 * without promise hooks, where the gate costs nothing and changes nothing.
 *
 * `run` counts the calls in flight; when the last one settles, every storage is disabled
 * (Node re-enables a storage on its next `run`), and with no storage left enabled Node
 * removes the promise hooks. A storage is never disabled while one of the gated calls is in
 * flight, so no call of better-auth loses its context.
 */
export class ContextGate {
  #active = 0;

  /**
   * @param storages the storages to disable when idle, read at each switch-off (better-auth creates its storages lazily).
   */
  constructor(private readonly storages: () => Iterable<{ disable(): void }>) {}

  /** Calls in flight (started by `run` or `track` and not settled yet). */
  get active(): number {
    return this.#active;
  }

  /** Runs `fn` with the storages allowed on; disables them once no gated call is left in flight. Rejections pass through. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    this.#active += 1;
    try {
      return await fn();
    } finally {
      this.#active -= 1;
      if (this.#active === 0) for (const s of this.storages()) s.disable();
    }
  }

  /** Counts work left running in the background (e.g. better-auth's `backgroundTasks`) as in flight until it settles; its rejection is passed to `onError`. */
  track(work: Promise<unknown>, onError: (e: unknown) => void = () => {}): void {
    this.run(() => work).catch(onError);
  }
}

/**
 * better-auth's AsyncLocalStorage instances, from its process-global registry
 * (`globalThis[Symbol.for('better-auth:global')].context`, where @better-auth/core keeps them
 * so that several copies of the library share them). Empty until better-auth created them.
 */
export function betterAuthStorages(): { disable(): void }[] {
  const registry = (globalThis as Record<symbol, { context?: Record<string, unknown> } | undefined>)[Symbol.for('better-auth:global')];
  return Object.values(registry?.context ?? {}).filter(
    (s): s is { disable(): void } => typeof (s as { disable?: unknown } | null)?.disable === 'function',
  );
}

/**
 * Whether the process currently tracks promises with async hooks (what an enabled
 * AsyncLocalStorage costs on Node 20 and 22): with promise hooks installed every `await`
 * continuation runs under its own async id; without them consecutive continuations share
 * the id of the surrounding resource. A structural probe for tests and benchmarks.
 */
export async function promiseHooksActive(): Promise<boolean> {
  await null;
  const first = executionAsyncId();
  await null;
  return executionAsyncId() !== first;
}
