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
    // stdout through pino's own destination (sonic-boom, synchronous writes to file descriptor
    // 1, as pino does by default): no Node stream machinery per line, lines in order, nothing
    // buffered that a crash could lose.
    stream ? (stream as pino.DestinationStream) : pino.destination({ dest: 1, sync: true }),
  );
}
