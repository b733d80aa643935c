import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { type LimitDecision, rateLimitHeaders } from '../rate-limit/limiter.ts';
import { resolveAsOf, type AsOf } from './envelope.ts';

/** How long the client-error handler waits for the address's rate-limit state, ms. */
export const CLIENT_ERROR_LIMITS_TIMEOUT_MS = 500;

/** What the answer to a protocol error is built from. */
export interface ClientErrorDeps {
  log: Logger;
  /** The service's as-of day, for `meta.as_of`. */
  asOf: AsOf;
  /** The rate-limit state of a client address (unauthenticated tier), without counting anything. */
  limits(address: string): Promise<LimitDecision>;
  /** Used when `limits` does not answer within CLIENT_ERROR_LIMITS_TIMEOUT_MS (e.g. the address's state from memory). */
  fallbackLimits(address: string): Promise<LimitDecision>;
  /** Maximum size of the request line and headers, bytes (Node's `maxHeaderSize`). */
  maxHeaderSize: number;
  /** Called once per answered protocol error with its status (metrics). */
  onAnswer?(status: number): void;
}

/** Why llhttp refused the request, in words a client can act on. */
const PARSE_ERRORS: Record<string, string> = {
  HPE_INVALID_HEADER_TOKEN: 'a header name or value contains a character that is not allowed (e.g. a control byte)',
  HPE_INVALID_URL: 'the request target contains a character that is not allowed; percent-encode it',
  HPE_INVALID_METHOD: 'the HTTP method is not valid',
  HPE_INVALID_VERSION: 'the HTTP version is not valid (use HTTP/1.1)',
  HPE_INVALID_CONSTANT: 'the request line is not valid HTTP',
  HPE_INVALID_CONTENT_LENGTH: 'Content-Length must be a single decimal number',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'Content-Length and Transfer-Encoding must not both be sent',
  HPE_INVALID_TRANSFER_ENCODING: 'Transfer-Encoding is not valid',
  HPE_INVALID_CHUNK_SIZE: 'a chunk size of the chunked body is not valid',
  HPE_LF_EXPECTED: 'lines must end with CRLF',
  HPE_CR_EXPECTED: 'lines must end with CRLF',
};

/** Status, message of a Node HTTP parser / server error (`err.code`). */
export function describeClientError(code: string | undefined, maxHeaderSize: number): { status: number; message: string } {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return {
      status: 431,
      message: `The request line and headers are too large (at most ${Math.floor(maxHeaderSize / 1024)} KB in total): send fewer or shorter headers`,
    };
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    return { status: 408, message: 'The request was not received in time: send it again' };
  }
  const why = (code && PARSE_ERRORS[code]) ?? 'it is not valid HTTP/1.1';
  return { status: 400, message: `Malformed HTTP request: ${why}` };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.catch(() => null),
    new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The Node HTTP server's `clientError` handler (Fastify's `clientErrorHandler`): a request
 * the HTTP parser refused before Fastify saw it (431 for headers over `maxHeaderSize`, 400 for
 * bad bytes such as a control byte in a header, 408 on timeout) is answered with a raw
 * HTTP/1.1 response carrying the error envelope (code INVALID_PARAMETER), a fresh
 * `X-Request-Id` and the client address's rate-limit headers (the unauthenticated tier's
 * state; nothing is counted), then the connection is closed. Nothing of the request is
 * logged but the parser's error code (the bytes may hold credentials). A reset connection,
 * or one whose response has already started, is just closed.
 */
export function createClientErrorHandler(deps: ClientErrorDeps): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return function onClientError(err, socket) {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const id = randomUUID();
    const address = socket.remoteAddress ?? 'unknown';
    const { status, message } = describeClientError(err.code, deps.maxHeaderSize);
    deps.log.info({ request_id: id, status, code: err.code, ip: address }, 'client error');
    void (async () => {
      const limits = (await withTimeout(deps.limits(address), CLIENT_ERROR_LIMITS_TIMEOUT_MS)) ?? (await deps.fallbackLimits(address));
      if (socket.destroyed || !socket.writable) return;
      const body = JSON.stringify({
        status: 'error',
        data: null,
        error: { code: 'INVALID_PARAMETER', message },
        meta: { timestamp: new Date().toISOString(), version: 'v1', cached: false, request_id: id, as_of: resolveAsOf(deps.asOf) },
      });
      const headers: Record<string, string> = {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': String(Buffer.byteLength(body)),
        'Cache-Control': 'no-store',
        'X-Request-Id': id,
        'X-Content-Type-Options': 'nosniff',
        ...rateLimitHeaders(limits),
        Connection: 'close',
      };
      const head = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      deps.onAnswer?.(status);
      socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${body}`);
      // The client may keep sending (a huge header): do not wait for it longer than a second.
      setTimeout(() => socket.destroy(), 1000).unref();
    })().catch(() => socket.destroy());
  };
}
