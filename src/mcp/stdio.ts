import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import type { Logger } from 'pino';
import { loggableError, SAME_CTRL_C_MS, ServiceError, StartupStopped } from '../errors.ts';
import { type Access, anonymousCaller, type Caller, MESSAGES, PUBLIC_UNMETERED } from '../services/access.ts';
import type { KeyService } from '../services/keys.ts';
import type { Services } from '../services/operation.ts';
import { invalidEnvelope, messageId } from './envelope.ts';
import { createMcpServer } from './server.ts';
import type { ToolContext } from './tool.ts';

/**
 * How long the stdio server keeps answering after stdin ends, at most, ms: the requests read
 * before it may wait for the core (a first start takes a few seconds on a slow machine).
 */
export const STDIN_END_DRAIN_MS = 60_000;

/**
 * How long a failed start (a refused key, a start-up failure) waits, at most, ms, for the
 * requests read so far to be answered with the failure before runStdio rejects: answering
 * them is a few turns of the event loop; the bound keeps a stuck write from holding the exit.
 */
export const FAILURE_DRAIN_MS = 5_000;

/**
 * Resolves once everything written to `out` so far has been handed to the operating system
 * (it writes an empty chunk, whose callback runs after the writes before it), or at once when
 * nothing is queued or `out` is ended or destroyed; never rejects. For process.stdout before process.exit, which drops writes still
 * queued on a pipe.
 * @param ms the longest wait (default 5 s: a client that stopped reading must not hold the exit).
 */
export function flushed(out: Writable, ms = 5_000): Promise<void> {
  return new Promise((resolve) => {
    if (out.destroyed || out.writableEnded || out.writableLength === 0) return resolve();
    const timer = setTimeout(resolve, ms);
    out.write('', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** How long a stop after SIGTERM or SIGINT may take by default, ms (SHUTDOWN_TIMEOUT_MS's default). */
const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;

/** Environment variable that carries the API key for the stdio server. */
export const STDIO_KEY_ENV = 'MARKET_INTEL_API_KEY';

/** What the stdio server runs on: the core's services, keys and access rules, and its logger (stderr). */
export interface StdioDeps {
  services: Services & { keys: KeyService };
  access: Access;
  log: Logger;
  asOf: string | null;
  /** The database in use, in words (`PGLITE_DIR=/path` or `DATABASE_URL`): keys live there. */
  database: string;
  /** Called once when the client goes away (closes the core). */
  onClose(): Promise<void>;
}

/**
 * Longest message the stdio server reads, bytes: the HTTP endpoint's body limit (Fastify's
 * default, 1 MiB). A longer line would otherwise be held whole in memory, and past the SDK's
 * own 10 MiB read buffer it closes the transport, which ends the server unanswered.
 */
export const STDIO_MAX_MESSAGE_BYTES = 1_048_576;

/** The head and tail of a line kept to find the id of a message too long to read. */
const ID_WINDOW = 256;

/** An id value as JSON: an integer, or a string of at most 200 characters. */
const ID_VALUE = String.raw`(-?\d+|"(?:[^"\\]|\\.){0,200}")`;
/** `{"jsonrpc": "2.0", "id": <id>` at the start of a line. */
const ID_AT_HEAD = new RegExp(String.raw`^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*${ID_VALUE}`);
/** `, "id": <id>}` at the end of a line. */
const ID_AT_TAIL = new RegExp(String.raw`[,{]\s*"id"\s*:\s*${ID_VALUE}\s*\}\s*$`);

/**
 * The id of a JSON-RPC request whose line is too long to parse, from its first or last bytes
 * when it is where clients put it: right after `"jsonrpc": "2.0"` at the start, or the last
 * member of the object (`..., "id": 7}`: the SDK's order). A nested `"id"` cannot match
 * either. null when not found.
 */
function idOfLongLine(head: string, tail: string): string | number | null {
  const m = ID_AT_HEAD.exec(head) ?? ID_AT_TAIL.exec(tail);
  if (!m) return null;
  try {
    const id = JSON.parse(m[1]!) as string | number;
    return typeof id === 'number' && !Number.isSafeInteger(id) ? null : id;
  } catch {
    return null;
  }
}

/**
 * stdin as the SDK's stdio transport reads it, without the lines it would drop unanswered
 * (its read buffer reports them to `onerror` only, and the client waits forever) or that would
 * end it. Each such line is answered on stdout here, whole lines as the transport writes them:
 * not JSON -32700; a batch (not accepted over stdio), a wrong envelope or a line over
 * STDIO_MAX_MESSAGE_BYTES -32600, with the message's id when it has one (a long line's is
 * looked for in its first and last bytes: idOfLongLine; its bytes are dropped as they come,
 * never held). Lines end at `\n` (a `\r` before it is dropped); blank lines are skipped. The
 * other lines pass on unchanged.
 * @param maxBytes longest line read, bytes (default STDIO_MAX_MESSAGE_BYTES; tests).
 */
export function screenedStdin(
  input: Readable,
  log: Logger,
  output: Writable = process.stdout,
  maxBytes = STDIO_MAX_MESSAGE_BYTES,
): Readable {
  const screened = new PassThrough();
  const answer = (code: number, message: string, id: string | number | null) => {
    log.warn({ code, reason: message }, 'MCP stdio: unreadable message answered');
    output.write(`${JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } })}\n`);
  };
  const onLine = (line: string) => {
    if (line.trim() === '') return;
    let m: unknown;
    try {
      m = JSON.parse(line);
    } catch {
      return answer(-32700, 'Parse error: the line is not valid JSON; send one JSON-RPC message per line', null);
    }
    if (Array.isArray(m))
      return answer(-32600, 'Invalid Request: a batch is not accepted over stdio; send one JSON-RPC message per line', null);
    const why = invalidEnvelope(m);
    if (why) return answer(-32600, `Invalid Request: ${why}; send {"jsonrpc": "2.0", "id": ..., "method": ...}`, messageId(m));
    screened.write(`${line}\n`);
  };
  // The line being read: its parts while it fits, else its first and last bytes (`over`).
  let parts: Buffer[] = [];
  let size = 0;
  let over: { head: Buffer; tail: Buffer; bytes: number } | null = null;
  const endLine = () => {
    if (over) {
      const head = over.head.toString('utf8');
      const tail = over.tail.toString('utf8');
      answer(
        -32600,
        `Invalid Request: the message is ${over.bytes} bytes; at most ${maxBytes} bytes per message (as over HTTP): send smaller arguments`,
        idOfLongLine(head, tail),
      );
    } else if (size > 0) {
      let line = Buffer.concat(parts, size).toString('utf8');
      if (line.endsWith('\r')) line = line.slice(0, -1);
      onLine(line);
    }
    parts = [];
    size = 0;
    over = null;
  };
  /** The first or last ID_WINDOW bytes of `bufs` taken together, copied out of them. */
  const edge = (bufs: Buffer[], which: 'head' | 'tail'): Buffer => {
    const picked: Buffer[] = [];
    let n = 0;
    for (let k = 0; k < bufs.length && n < ID_WINDOW; k++) {
      const b = bufs[which === 'head' ? k : bufs.length - 1 - k]!;
      if (which === 'head') picked.push(b);
      else picked.unshift(b);
      n += b.length;
    }
    const joined = Buffer.concat(picked);
    return Buffer.from(which === 'head' ? joined.subarray(0, ID_WINDOW) : joined.subarray(-ID_WINDOW));
  };
  const take = (piece: Buffer) => {
    if (piece.length === 0) return;
    if (!over && size + piece.length <= maxBytes) {
      parts.push(piece);
      size += piece.length;
      return;
    }
    if (!over) {
      // Only the first and last ID_WINDOW bytes are kept: no copy of the megabyte read so far.
      const all = [...parts, piece];
      over = { head: edge(all, 'head'), tail: edge(all, 'tail'), bytes: size + piece.length };
      parts = [];
      size = 0;
      return;
    }
    over.bytes += piece.length;
    over.tail = Buffer.concat([over.tail, piece.subarray(-ID_WINDOW)]).subarray(-ID_WINDOW);
  };
  input.on('data', (chunk: Buffer | string) => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    let start = 0;
    for (let nl = data.indexOf(10, start); nl !== -1; nl = data.indexOf(10, start)) {
      take(data.subarray(start, nl));
      endLine();
      start = nl + 1;
    }
    take(data.subarray(start));
  });
  input.on('end', () => {
    endLine();
    screened.end();
  });
  input.on('error', (e) => screened.destroy(e));
  return screened;
}

/**
 * The JSON-RPC error for a line of stdin the SDK's stdio transport could not read (its
 * `onerror`): -32600 when it is JSON but not a message the SDK's schema accepts. Lines that
 * are not JSON, batches and wrong envelopes never reach the transport (screenedStdin answers
 * them); null for any other error (stdin itself failing).
 */
export function unreadableLine(err: Error): { code: number; message: string } | null {
  if (err.name === 'ZodError')
    return {
      code: -32600,
      message:
        'Invalid Request: the line is not one JSON-RPC message (a batch is not accepted over stdio); send one {"jsonrpc": "2.0", "id": ..., "method": ...} object per line',
    };
  return null;
}

/**
 * Serves the six MCP tools over stdio for local clients (Claude Desktop, Cursor, VS Code):
 * stdout carries the protocol, logs go to stderr. The transport is connected at once, so
 * `initialize` (and the server's instructions) are answered while the core is still being
 * built (`deps`: database, dataset, series, backfill); `tools/list` and `tools/call` wait for
 * it. The caller is the API key in MARKET_INTEL_API_KEY, or the unauthenticated tier without
 * one; the key is checked once the core is ready and again on every call (a revoked key or a
 * changed tier counts at once), and tool calls count against its quota like REST requests,
 * with the same access rules.
 * @param deps the core when it is ready; a rejection (a start-up failure) stops the server.
 * @param log the process's logger (stderr), usable before the core is ready.
 * @throws the start-up failure of `deps`, or ServiceError UNAUTHORIZED when the key is set but
 *   invalid or revoked (the message names the variable). In both cases no tool has run and
 *   the core has been stopped; the requests read so far (for up to FAILURE_DRAIN_MS) have
 *   been answered with the failure (a refused key -32001 with `data: {code, reason}`, as MCP
 *   over HTTP answers it; a start-up failure the SDK's -32603) and those answers flushed to
 *   stdout, so the caller may exit at once.
 * @param opts.shutdownTimeoutMs how long a stop after SIGTERM or SIGINT may take, ms (default
 *   10 s, SHUTDOWN_TIMEOUT_MS): past it the process exits 1, even while the core is still
 *   starting. A start-up phase that computes without yielding (the dataset's series) ends
 *   first: the deadline is checked between phases. A core that is up when the deadline is
 *   checked is closed cleanly instead, within its own SHUTDOWN_TIMEOUT_MS (PGlite must not be
 *   cut off mid-write). A second SIGINT exits at once. When stdin ends, the stop may take
 *   STDIN_END_DRAIN_MS after the drain.
 * @param opts.startup aborted (with a StartupStopped) by SIGTERM or SIGINT while the core is
 *   still starting, so that `deps` ends at its next phase instead of starting in full only to
 *   be closed (createCore's `signal`); the process then exits 0 as after any stop. stdin
 *   ending does not abort it: a start that fails still exits 1 with its reason.
 */
export async function runStdio(
  deps: Promise<StdioDeps>,
  apiKey: string | undefined,
  log: Logger,
  opts: { shutdownTimeoutMs?: number; startup?: AbortController } = {},
): Promise<void> {
  const shutdownTimeoutMs = opts.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
  const authenticate = async (d: StdioDeps): Promise<Caller> => {
    if (!apiKey) return anonymousCaller('stdio');
    // The same access rules as REST and MCP over HTTP, and their messages but for a value that
    // is not a key (below); the key is checked, never metered here.
    const auth = await d.access.authenticate(`Bearer ${apiKey}`, PUBLIC_UNMETERED, 'stdio');
    if (auth.ok) return auth.caller;
    if (auth.cause) d.log.error({ err: loggableError(auth.cause) }, 'dependency unavailable');
    const reason = auth.error.details?.reason;
    // Not a key at all (a JWT, another service's token: `wrong_credential`; with spaces,
    // `Bearer svc_live_...`, which fails as an Authorization header: `malformed_header`): the
    // HTTP wording (headers, JWTs) does not apply to an environment variable.
    if (reason === 'wrong_credential' || reason === 'malformed_header')
      throw new ServiceError('UNAUTHORIZED', MESSAGES.notAKeyInEnv(STDIO_KEY_ENV), auth.error.details);
    // A well-formed key this database does not know was most likely made by a service on
    // another database: say which one this process opened.
    const where =
      reason === 'unknown'
        ? ` (looked up in the database at ${d.database}: keys live in the database of the service that created them, so give this process the same PGLITE_DIR or DATABASE_URL)`
        : '';
    throw new ServiceError(auth.error.code, `${STDIO_KEY_ENV}: ${auth.error.message}${where}`, auth.error.details);
  };
  const context: Promise<ToolContext> = deps.then(async (d) => {
    try {
      const caller = await authenticate(d);
      return {
        services: d.services,
        access: d.access,
        caller,
        reauthenticate: () => authenticate(d),
        logError: (err: unknown, tool: string) => d.log.error({ err, tool }, 'MCP tool failed'),
      };
    } catch (err) {
      await d.onClose().catch(() => {});
      throw err;
    }
  });
  // A failed start (stdio: the key refused) answers the waiting requests, then the process exits with the reason.
  context.catch(() => {});
  const server = createMcpServer(context);
  const transport = new StdioServerTransport(screenedStdin(process.stdin, log), process.stdout);
  let closing = false;
  // Set once the core's own close has begun: a stop deadline met after that leaves it to the
  // close's own bound (below) rather than exiting in the middle of it.
  let coreClosing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await server.close().catch(() => {});
    // A core still starting is closed once it is up or has ended (a signal ends it at its next
    // phase: onSignal), its database closed cleanly (PGlite must not be cut off mid-write); one
    // that got up is closed within its own bound.
    const outcome = await deps.then(
      (core) => ({ core, stopped: false }),
      (e: unknown) => ({ core: null, stopped: e instanceof StartupStopped }),
    );
    const { core } = outcome;
    if (core) {
      coreClosing = true;
      const bound = setTimeout(() => {
        log.error(
          { timeout_ms: shutdownTimeoutMs },
          'MCP stdio: closing the core did not finish in time: exiting now (SHUTDOWN_TIMEOUT_MS)',
        );
        void flushed(process.stdout, 1000).finally(() => process.exit(1));
      }, shutdownTimeoutMs);
      await core.onClose().catch(() => {});
      clearTimeout(bound);
    }
    // A failed start (the core, or the key refused) is no clean end even when stdin ended
    // first: runStdio rejects with it (below), and the command prints it and exits 1.
    if (
      await context.then(
        () => false,
        () => true,
      )
    ) {
      // Unless it failed only because this stop ended it: that is a clean end.
      if (!outcome.stopped) return;
      log.info(`MCP stdio: ${StartupStopped.LOG_LINE}`);
    }
    await flushed(process.stdout);
    process.exit(0);
  };
  /**
   * Ends the process (exit 1, the reason logged) if it is still running `ms` from now: a stop
   * that waits for a core still starting must end even if that never finishes. Once the core's
   * close has begun it does nothing: the close has its own bound (in `close`).
   */
  const exitAfter = (ms: number, why: string) =>
    setTimeout(() => {
      if (coreClosing) return;
      log.error({ timeout_ms: ms }, why);
      void flushed(process.stdout, 1000).finally(() => process.exit(1));
    }, ms);
  transport.onclose = () => void close();
  // When stdin ends (a script piping its requests in), the requests still waiting (for the core,
  // which takes a second or more to start) are answered first: closing at once dropped them.
  process.stdin.on(
    'end',
    () =>
      void answered(STDIN_END_DRAIN_MS).then(() => {
        exitAfter(STDIN_END_DRAIN_MS, 'MCP stdio: stdin ended, and the core did not finish starting or closing in time: exiting now');
        return close();
      }),
  );
  // A signal stops the server within shutdownTimeoutMs whatever the core is doing (as `serve`
  // does); a second Ctrl+C (SIGINT) exits at once, a repeated SIGTERM changes nothing, and the
  // same Ctrl+C forwarded by npm (within SAME_CTRL_C_MS) is not a second one.
  let signalledAt: number | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalledAt !== null) {
      if (signal === 'SIGINT' && performance.now() - signalledAt >= SAME_CTRL_C_MS) process.exit(1);
      return;
    }
    signalledAt = performance.now();
    // The start-up ends at its next phase. Only for a signal: stdin ending still waits for the
    // start-up's outcome, so that a broken setup (a refused key, a database in use) exits 1
    // with its reason rather than 0.
    opts.startup?.abort(new StartupStopped('The MCP server was stopped while it was starting; start it again to use the tools'));
    exitAfter(
      shutdownTimeoutMs,
      `MCP stdio: ${signal}: the stop did not finish in time (the core was still starting or closing): exiting now (SHUTDOWN_TIMEOUT_MS)`,
    );
    void close();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  await server.connect(transport);
  // Requests read and not answered yet: how many per id (a client may reuse an id), less the
  // ones it cancelled (the SDK sends nothing for those). The transport's onmessage and send, as
  // the SDK's Protocol set them on connect.
  const pending = new Map<string | number, number>();
  /** Called once every request read so far is answered (the waits of `answered`). */
  const drainWaiters = new Set<() => void>();
  const settle = (id: string | number, all: boolean) => {
    const n = pending.get(id) ?? 0;
    if (n === 0) return;
    if (all || n === 1) pending.delete(id);
    else pending.set(id, n - 1);
    if (pending.size === 0) for (const w of [...drainWaiters]) w();
  };
  const onmessage = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage) => {
    const m = message as { id?: string | number; method?: unknown; params?: { requestId?: unknown } };
    if (m.id !== undefined && typeof m.method === 'string') pending.set(m.id, (pending.get(m.id) ?? 0) + 1);
    onmessage?.(message);
    const cancelled = m.method === 'notifications/cancelled' ? m.params?.requestId : undefined;
    if (typeof cancelled === 'string' || typeof cancelled === 'number') settle(cancelled, true);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    await send(message);
    const m = message as { id?: string | number | null; method?: unknown };
    if (m.id !== undefined && m.id !== null && m.method === undefined) settle(m.id, false);
  };
  /** Resolves once every request read so far is answered (its answer handed to stdout), or after `ms`. */
  const answered = (ms: number) =>
    new Promise<void>((resolve) => {
      if (pending.size === 0) return resolve();
      const done = () => {
        clearTimeout(timer);
        drainWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      drainWaiters.add(done);
    });
  // A line the transport cannot read as one JSON-RPC message is dropped by the SDK, so the
  // client would wait for an answer forever: answer it (id null: it could not be read).
  const sdkOnError = transport.onerror;
  transport.onerror = (err: Error) => {
    sdkOnError?.(err);
    const answer = unreadableLine(err);
    if (!answer) return;
    log.warn({ reason: answer.message }, 'MCP stdio: unreadable message answered');
    transport.send({ jsonrpc: '2.0', id: null, error: answer } as never).catch(() => {});
  };
  log.info('MCP stdio server connected: initialize is answered now, tools once the data is loaded');
  let ctx: ToolContext;
  try {
    ctx = await context;
  } catch (err) {
    // A stop ended the start-up: `close` ends the process (exit 0), as after any stop.
    if (err instanceof StartupStopped) return;
    // The caller exits on this error: first the requests waiting for the core get their
    // answer (createMcpServer answers them with the refusal), and stdout is flushed, or the
    // exit could cut them off and the client would see a closed connection instead.
    await answered(FAILURE_DRAIN_MS);
    await flushed(process.stdout);
    throw err;
  }
  const d = await deps;
  log.info({ tier: ctx.caller.tier, as_of: d.asOf }, 'MCP stdio server ready');
}
