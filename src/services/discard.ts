import pRetry from 'p-retry';

/**
 * How long after a failed creation its row is deleted a second time (ms): a COMMIT whose reply
 * was lost may reach PostgreSQL late, but no later than the session's
 * idle_in_transaction_session_timeout (5 s, store/db.ts DEFAULT_DB_TIMEOUTS), after which
 * PostgreSQL aborts the transaction instead.
 */
export const DISCARD_RECHECK_MS = 6_000;

/**
 * Undoes a creation whose request failed (a 503 after the database timed out, possibly once
 * PostgreSQL had the COMMIT and only its reply was lost), so that a failed request leaves
 * nothing behind: runs `remove` (a delete by the new row's id or digest, a no-op when nothing
 * was stored) in the background, at once and again after DISCARD_RECHECK_MS, each time retried
 * with backoff while the database is unreachable (p-retry: 4 retries, 1-8 s apart). Failures
 * are dropped: the row was never shown to anyone, at worst it stays. Timers do not keep the
 * process alive.
 */
export function discardInBackground(remove: () => Promise<unknown>): void {
  const attempt = () =>
    pRetry(remove, { retries: 4, minTimeout: 1_000, maxTimeout: 8_000, unref: true }).then(
      () => undefined,
      () => undefined,
    );
  void (async () => {
    await attempt();
    await new Promise<void>((resolve) => setTimeout(resolve, DISCARD_RECHECK_MS).unref());
    await attempt();
  })();
}
