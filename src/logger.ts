import { once } from 'node:events';
import { pino, type Logger } from 'pino';
import type { Config } from './config.ts';

/**
 * The logger of the process: pino, JSON lines to `stream`, default stdout. Authorization
 * and cookie headers are redacted should a request's headers ever be logged, and so are the arguments
 * of a failed Redis command an ioredis error carries (AUTH's is the password).
 * @param opts.sync for the default stdout destination only (ignored when `stream` is given):
 *   true (default) writes each line at once; false buffers them (see below; `serve` uses it).
 */
export function createLogger(level: Config['LOG_LEVEL'], stream?: NodeJS.WritableStream, opts: { sync?: boolean } = {}): Logger {
  return pino(
    {
      level,
      // No wildcard paths: they cost on every line.
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'headers.authorization',
          'headers.cookie',
          // ioredis errors carry the failed command with its arguments: AUTH's is the password.
          'err.command.args',
          'err.cause.command.args',
        ],
        censor: '[redacted]',
      },
    },
    // stdout through pino's own destination (sonic-boom). `sync: true` (the default here, for
    // one-shot commands such as `ingest --once`, whose results go to stdout too): one write(2)
    // per line, in order with the command's own output. `sync: false` (`serve`): pino's default
    // asynchronous mode, as Fastify's default logger and the bench's standard-plugin peer use
    // it: a line is written at once when no write is in flight, and lines that arrive during a
    // write go out together in the next one, so under load there is not one write(2) per
    // request (the twelfth session's strace: one per request before, one per ~15 after). pino
    // flushes the buffered lines synchronously when the process exits (`buildSafeSonicBoom` in
    // pino's lib/tools.js registers `exit` and `beforeExit` handlers, which an uncaught
    // exception and the service's SIGTERM shutdown also reach). A SIGKILL, a native abort (a
    // V8 out-of-memory) or a stdout blocked at exit can still lose or reorder the last write.
    stream ? (stream as pino.DestinationStream) : pino.destination({ dest: 1, sync: opts.sync ?? true }),
  );
}

/** pino's own destination (sonic-boom), with its in-flight flag (sonic-boom 4 has no public getter for it). */
type Destination = ReturnType<typeof pino.destination> & { _writing?: boolean };

/**
 * Writes out everything a logger made by `createLogger` holds for its stdout destination in
 * asynchronous mode: waits (at most `timeoutMs`) for sonic-boom's 'drain', which it emits once
 * the write in flight and every line queued behind it are written, then writes anything left
 * with `flushSync`. For a failed start, so that the log lines come before the error message
 * the command prints on stderr. Resolves at once for a synchronous destination or a caller's
 * stream; never rejects.
 */
export async function flushLogger(log: Logger, timeoutMs = 1000): Promise<void> {
  const stream = (log as unknown as Record<symbol, Destination | undefined>)[pino.symbols.streamSym];
  if (typeof stream?.flushSync !== 'function') return;
  if (stream._writing) await once(stream, 'drain', { signal: AbortSignal.timeout(timeoutMs) }).catch(() => {});
  try {
    stream.flushSync();
  } catch {
    // Not ready or already destroyed: nothing buffered can be written.
  }
}
