import { chmodSync, lstatSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { PLAN_TIERS, type PlanTier } from '../auth/tiers.ts';

/*
 * The local admin channel: while a service runs on the embedded PGlite database it holds the
 * database alone (one process per folder), so operator commands that must change data reach
 * it through a Unix socket beside the database folder instead. The socket is created with
 * mode 0600 (only the service's OS user can connect), accepts one request per connection,
 * newline-delimited JSON, and knows one operation: set a user's plan tier.
 */

/** A request on the admin channel: the only operation is `set-tier`. */
export interface SetTierRequest {
  op: 'set-tier';
  /** The user's email (case-insensitive). */
  email: string;
  tier: PlanTier;
}

/** The answer: how many users were changed, or an error with a message for the operator. */
export type AdminResponse = { ok: true; users: number } | { ok: false; error: { code: string; message: string } };

/** Largest request accepted, bytes. */
const MAX_REQUEST_BYTES = 4096;
/** How long a connection may stay open, ms. */
const CONNECTION_TIMEOUT_MS = 5000;

/** Path of the admin socket of the PGlite database in `pgliteDir`: `<dir>.admin.sock`, beside its lock file. */
export function adminSocketPath(pgliteDir: string): string {
  // As store/db.ts `pgliteSibling` (the admin channel imports nothing from the store).
  return `${pgliteDir.replace(/[\\/]+$/, '')}.admin.sock`;
}

/** Raised by the client when the admin channel cannot be reached or answers an error. */
export class AdminChannelError extends Error {
  override name = 'AdminChannelError';
}

/** Checks a decoded request; returns the request or an error message. */
function parseRequest(v: unknown): SetTierRequest | string {
  if (typeof v !== 'object' || v === null) return 'the request must be a JSON object';
  const r = v as Record<string, unknown>;
  if (r.op !== 'set-tier') return `unknown op ${JSON.stringify(r.op)}: the only operation is "set-tier"`;
  if (typeof r.email !== 'string' || !r.email.includes('@') || r.email.length > 320) return 'email must be an email address';
  if (!PLAN_TIERS.includes(r.tier as PlanTier)) return `tier must be one of ${PLAN_TIERS.join(', ')}`;
  return { op: 'set-tier', email: r.email, tier: r.tier as PlanTier };
}

/**
 * Starts the admin channel at `socketPath` (a stale socket file left by a crashed service is
 * replaced: the caller holds the database lock, so no live service owns it). `setTier`
 * performs the change in the running service (and must evict its key cache) and returns the
 * number of users changed.
 * @returns a function that closes the channel and removes the socket file.
 * @throws when the socket cannot be created (e.g. the path is longer than ~100 bytes).
 */
export async function startAdminChannel(
  socketPath: string,
  setTier: (email: string, tier: PlanTier) => Promise<number>,
): Promise<() => Promise<void>> {
  rmSync(socketPath, { force: true });
  const server: Server = createServer((sock) => {
    sock.setTimeout(CONNECTION_TIMEOUT_MS, () => sock.destroy());
    let buf = '';
    let done = false;
    const answer = (r: AdminResponse) => {
      done = true;
      sock.end(`${JSON.stringify(r)}\n`);
    };
    sock.on('error', () => sock.destroy());
    sock.on('data', (chunk) => {
      if (done) return;
      buf += chunk.toString('utf8');
      if (buf.length > MAX_REQUEST_BYTES)
        return answer({ ok: false, error: { code: 'BAD_REQUEST', message: `request larger than ${MAX_REQUEST_BYTES} bytes` } });
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      let req: SetTierRequest | string;
      try {
        req = parseRequest(JSON.parse(buf.slice(0, nl)));
      } catch {
        req = 'the request is not valid JSON';
      }
      if (typeof req === 'string') return answer({ ok: false, error: { code: 'BAD_REQUEST', message: req } });
      done = true;
      setTier(req.email, req.tier).then(
        (users) => answer({ ok: true, users }),
        () => answer({ ok: false, error: { code: 'INTERNAL', message: 'the service could not change the tier; see its log' } }),
      );
    });
  });
  // Created with mode 0600 from the start (umask), not narrowed after the fact.
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(socketPath, 0o600);
  return async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(socketPath, { force: true });
  };
}

/**
 * Why the client must not use the socket file at `socketPath`, or null: a file that is not a
 * socket, or a socket owned by another OS user than this process's (another local user could
 * have put a socket of their own there while no service ran, to read the email and the tier
 * and answer a fake success). A socket of root's is trusted too. An absent file is left to the
 * connection's own error; on a platform without uids (Windows) nothing is checked.
 */
function untrustedSocket(socketPath: string): string | null {
  const uid = process.getuid?.();
  if (uid === undefined) return null;
  let st;
  try {
    st = lstatSync(socketPath);
  } catch {
    return null;
  }
  if (!st.isSocket()) return `${socketPath} is not a socket`;
  if (st.uid !== uid && st.uid !== 0)
    return `${socketPath} belongs to another OS user (uid ${st.uid}, not ${uid}): run the command as the service's OS user, or remove the file if no service of yours runs`;
  return null;
}

/**
 * Asks the service listening at `socketPath` to set the tier of the users with `email`.
 * Bounded by `timeoutMs` (default 5000).
 * @returns the number of users changed (0 when no user has this email).
 * @throws AdminChannelError when the socket is absent, is not a socket or belongs to another
 *   OS user (nothing is sent to it), refuses, times out or answers an error.
 */
export function requestSetTier(socketPath: string, email: string, tier: PlanTier, timeoutMs = 5000): Promise<number> {
  const untrusted = untrustedSocket(socketPath);
  if (untrusted) return Promise.reject(new AdminChannelError(`not asking the admin channel: ${untrusted}`));
  return new Promise((resolve, reject) => {
    const sock = createConnection(socketPath);
    let buf = '';
    const fail = (message: string) => {
      sock.destroy();
      reject(new AdminChannelError(message));
    };
    const timer = setTimeout(() => fail(`the service did not answer on ${socketPath} within ${timeoutMs} ms`), timeoutMs);
    sock.on('connect', () => sock.write(`${JSON.stringify({ op: 'set-tier', email, tier } satisfies SetTierRequest)}\n`));
    sock.on('data', (d) => (buf += d.toString('utf8')));
    sock.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      fail(`cannot reach the running service's admin channel ${socketPath} (${err.code ?? err.message})`);
    });
    sock.on('end', () => {
      clearTimeout(timer);
      try {
        const r = JSON.parse(buf) as AdminResponse;
        if (r.ok) resolve(r.users);
        else reject(new AdminChannelError(`the running service refused: ${r.error.message}`));
      } catch {
        reject(new AdminChannelError(`unexpected answer on ${socketPath}`));
      }
    });
  });
}
