import { pino, type Logger } from 'pino';
import type { Config } from './config.ts';

/**
 * The logger of the process: pino, JSON lines to `stream` (default stdout). Authorization
 * and cookie headers are redacted should a request's headers ever be logged.
 */
export function createLogger(level: Config['LOG_LEVEL'], stream?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      // No wildcard paths: they cost on every line.
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie'],
        censor: '[redacted]',
      },
    },
    // stdout through pino's own destination (sonic-boom) in pino's default asynchronous mode,
    // as Fastify's default logger and the bench's standard-plugin peer use it: a line is
    // written at once when no write is in flight, and lines that arrive during a write go out
    // together in the next one, so under load there is not one write(2) per request (the
    // twelfth session's strace: one per request before, one per ~15 after). Lines stay in
    // order; pino flushes the buffer synchronously when the process exits (its `exit` and
    // `beforeExit` handlers, which an uncaught exception and the service's SIGTERM shutdown also
    // reach; pino's docs/asynchronous.md), so only a SIGKILL or a power cut can lose the last
    // lines in flight.
    stream ? (stream as pino.DestinationStream) : pino.destination({ dest: 1, sync: false }),
  );
}
