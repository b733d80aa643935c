/**
 * The HTTP client shared by the live adapters: one request = per-host budget slot
 * (rate-limiter-flexible, a fixed window of 60 s per host) → fetch with a per-attempt timeout (AbortSignal.timeout) → status check → body
 * read → JSON parse → zod validation. 429, 5xx, network errors and timeouts are retried with
 * exponential backoff (p-retry), honouring `Retry-After` (the host's pause, waited out before the next attempt); other 4xx, garbage bodies and
 * format changes are not.
 */
import pRetry, { AbortError } from 'p-retry';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { z } from 'zod';
import { UpstreamError } from './source.ts';

/** Settings of {@link HttpClient}. */
export interface HttpClientOptions {
  fetch: typeof fetch;
  /** Per-attempt timeout, ms. */
  timeoutMs: number;
  /** Retries after the first attempt. */
  retries: number;
  /** Requests per minute per host. */
  hostBudgetPerMinute: number;
  /** First backoff delay, ms (doubles per retry, capped at 30 s). */
  retryMinTimeoutMs: number;
  /** Longest Retry-After honoured, ms. */
  maxRetryAfterMs: number;
  /** Longest wait for a budget slot, ms (default 120000). */
  budgetWaitMs?: number;
  /** Largest response body read, bytes (default {@link DEFAULT_MAX_BODY_BYTES}). */
  maxBodyBytes?: number;
}

/**
 * Largest response body read by default: 64 MiB, well above the largest upstream answer
 * (growthepie's fundamentals.json, a few MB). Without a bound, a mirror or proxy answering an
 * endless or huge body filled memory at the network's speed until the timeout (2.6 GB of RSS in
 * the 10 s of INGEST_TIMEOUT_MS on loopback).
 */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

/** One request to make. `source` names the series/provider in errors. */
export interface HttpRequest<T> {
  source: string;
  url: string;
  method?: 'GET' | 'POST';
  /** JSON body (POST). */
  body?: unknown;
  schema: z.ZodType<T>;
  signal?: AbortSignal | undefined;
}

/** A retryable failure inside one attempt (internal). */
class Retryable extends Error {
  constructor(readonly upstream: UpstreamError) {
    super(upstream.message);
  }
}

/**
 * Parses a Retry-After header: delta-seconds or an HTTP date.
 * @returns milliseconds to wait (>= 0), or undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, t - now) : undefined;
}

/** Formats a zod issue path as `[0].data[3].value`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `${s === '' ? '' : '.'}${String(p)}`;
  return s === '' ? '(root)' : s;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Reads a response body as UTF-8 text, at most `max` bytes: a larger one (by its Content-Length,
 * or once more has arrived) is cancelled and `tooLarge()` thrown.
 */
async function readBody(res: Response, max: number, tooLarge: () => Error): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks, size));
}

/** The path and query of a URL, for messages (never the host's credentials: there are none). */
function where(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

/**
 * Why `signal` aborted, for messages: `aborted: <reason>` when the reason is an Error of the
 * caller's (the ingest aborts with what ran out, e.g. the series' time bound, or that the
 * service is stopping), else just `aborted` (a plain abort() or AbortSignal.timeout()).
 */
function abortReason(signal: AbortSignal | undefined): string {
  const r: unknown = signal?.reason;
  return r instanceof Error && !(r instanceof DOMException) && r.message !== '' ? `aborted: ${r.message}` : 'aborted';
}

/** Fetch with budget, timeout, retries and schema validation. One instance is shared by all sources. */
export class HttpClient {
  readonly #opts: HttpClientOptions;
  readonly #budget: RateLimiterMemory;
  /**
   * Hosts that asked every client to wait (a 429, 418 or 503 with Retry-After): until when
   * (epoch ms) and the answer that asked. No request goes to such a host before then, from any
   * series: Binance bans an address that goes on sending after a 429 (HTTP 418), and the
   * series of one host share its limits (docs/live-data.md, "Retry-After").
   */
  readonly #paused = new Map<string, { until: number; answer: string }>();
  /** Requests sent (attempts, including retries), for tests and logs. */
  requests = 0;

  constructor(opts: HttpClientOptions) {
    this.#opts = opts;
    this.#budget = new RateLimiterMemory({ points: opts.hostBudgetPerMinute, duration: 60 });
  }

  /**
   * Takes one request slot of `host`, waiting (abortably, with a timer of our own) while the
   * host's budget is used up.
   * @throws UpstreamError 'budget' when no slot frees within `budgetWaitMs` or `signal` aborts.
   */
  async #acquire(source: string, host: string, url: string, signal?: AbortSignal): Promise<void> {
    const wait = this.#opts.budgetWaitMs ?? 120_000;
    const deadline = Date.now() + wait;
    for (;;) {
      // Checked before every try, not only the first: a pause set while this request waited
      // (another series' answer, e.g. a ban of an hour after a 429 of a second) holds it back too.
      const paused = this.#paused.get(host);
      if (paused && paused.until > Date.now()) {
        const left = paused.until - Date.now();
        const fail = (why: string) =>
          new UpstreamError(
            source,
            `${source}: ${where(url)}: not sent: ${host} asked to wait until ${new Date(paused.until).toISOString()} (${paused.answer}; ${why})`,
            'http',
          );
        if (left > this.#opts.maxRetryAfterMs || Date.now() + left > deadline)
          throw fail(`${Math.ceil(left / 1000)} s left, longer than this request may wait`);
        try {
          await sleep(left, signal);
        } catch {
          throw fail(abortReason(signal).replace(/^aborted/, 'aborted while waiting'));
        }
        continue;
      }
      let retryIn: number;
      try {
        await this.#budget.consume(host);
        return;
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        retryIn = Math.max(1, e.msBeforeNext);
      }
      const fail = (why: string) =>
        new UpstreamError(
          source,
          `${source}: ${where(url)}: no request slot for ${host} within the budget of ${this.#opts.hostBudgetPerMinute}/min (${why})`,
          'budget',
        );
      if (Date.now() + retryIn > deadline) throw fail(`next slot in ${retryIn} ms, longer than the ${wait} ms wait allowed`);
      try {
        await sleep(retryIn, signal);
      } catch {
        throw fail(abortReason(signal).replace(/^aborted/, 'aborted while waiting'));
      }
    }
  }

  /**
   * Records the host's Retry-After of `res` (if any) in #paused; a later, longer wait wins.
   * @returns that Retry-After, ms (undefined when there is none).
   */
  #pause(host: string, res: Response): number | undefined {
    const retryAfter = parseRetryAfter(res.headers.get('retry-after'));
    if (retryAfter === undefined || retryAfter <= 0) return retryAfter;
    // At most the last instant a Date can hold: a Retry-After of 1e20 s named no time at all.
    const until = Math.min(Date.now() + retryAfter, 8.64e15);
    if ((this.#paused.get(host)?.until ?? 0) < until)
      this.#paused.set(host, { until, answer: `HTTP ${res.status}, Retry-After ${Math.round(retryAfter / 1000)} s` });
    return retryAfter;
  }

  /**
   * Makes the request and returns the validated body.
   * @throws UpstreamError: 'http' (status after retries, or a non-retryable 4xx, `status` set),
   *   'timeout', 'network', 'format' (not JSON, or a field not as documented: the message
   *   names the field path) or 'budget'.
   */
  async json<T>(req: HttpRequest<T>): Promise<T> {
    const { source, url, signal } = req;
    const host = new URL(url).host;
    const path = where(url);
    /** The last retryable failure, named when the caller's signal ends the retries. */
    let last: string | undefined;
    const aborted = (cause: unknown) =>
      new UpstreamError(
        source,
        `${source}: ${path}: ${abortReason(signal)}${last === undefined ? '' : ` (last attempt: ${last.slice(`${source}: ${path}: `.length)})`}`,
        'network',
        { cause },
      );
    const attempt = async (): Promise<T> => {
      await this.#acquire(source, host, url, signal);
      const timeout = AbortSignal.timeout(this.#opts.timeoutMs);
      const s = signal ? AbortSignal.any([signal, timeout]) : timeout;
      let res: Response;
      let text: string;
      try {
        this.requests++;
        res = await this.#opts.fetch(url, {
          method: req.method ?? 'GET',
          headers:
            req.body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
          body: req.body === undefined ? undefined : JSON.stringify(req.body),
          signal: s,
        });
        // A host that asks to wait is not asked again before then, by any series (#paused).
        const retryAfter = res.status === 429 || res.status === 418 || res.status >= 500 ? this.#pause(host, res) : undefined;
        if (res.status === 429 || res.status >= 500) {
          await res.body?.cancel().catch(() => {});
          const err = new UpstreamError(source, `${source}: ${path}: HTTP ${res.status}`, 'http', { status: res.status });
          if (retryAfter !== undefined && retryAfter <= this.#opts.maxRetryAfterMs)
            throw new Retryable(
              new UpstreamError(source, `${err.message}, Retry-After ${Math.round(retryAfter / 1000)} s`, 'http', { status: res.status }),
            );
          if (retryAfter !== undefined) {
            throw new AbortError(
              new UpstreamError(
                source,
                `${err.message}, Retry-After ${Math.round(retryAfter / 1000)} s exceeds the ${this.#opts.maxRetryAfterMs} ms limit`,
                'http',
                {
                  status: res.status,
                },
              ),
            );
          }
          throw new Retryable(err);
        }
        if (!res.ok) {
          await res.body?.cancel().catch(() => {});
          throw new AbortError(new UpstreamError(source, `${source}: ${path}: HTTP ${res.status}`, 'http', { status: res.status }));
        }
        const maxBody = this.#opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
        text = await readBody(
          res,
          maxBody,
          () =>
            new AbortError(
              new UpstreamError(source, `${source}: ${path}: response larger than ${maxBody} bytes, not read further`, 'format'),
            ),
        );
      } catch (e) {
        if (e instanceof Retryable || e instanceof AbortError) throw e;
        if (signal?.aborted) throw new AbortError(aborted(e));
        if (timeout.aborted) {
          throw new Retryable(
            new UpstreamError(source, `${source}: ${path}: no complete answer within ${this.#opts.timeoutMs} ms`, 'timeout', { cause: e }),
          );
        }
        const msg = e instanceof Error ? (e.cause instanceof Error ? `${e.message}: ${e.cause.message}` : e.message) : String(e);
        throw new Retryable(new UpstreamError(source, `${source}: ${path}: network error (${msg})`, 'network', { cause: e }));
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch (e) {
        const head = text.slice(0, 60).replace(/[^\x20-\x7e]/g, '?');
        throw new AbortError(
          new UpstreamError(source, `${source}: ${path}: response is not JSON (starts with '${head}')`, 'format', { cause: e }),
        );
      }
      const parsed = req.schema.safeParse(body);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new AbortError(
          new UpstreamError(
            source,
            `${source}: ${path}: unexpected response format at field ${formatPath(issue.path)}: ${issue.message}`,
            'format',
            {
              cause: parsed.error,
            },
          ),
        );
      }
      return parsed.data;
    };
    try {
      return await pRetry(attempt, {
        retries: this.#opts.retries,
        minTimeout: this.#opts.retryMinTimeoutMs,
        maxTimeout: 30_000,
        factor: 2,
        randomize: true,
        signal,
        shouldRetry: ({ error }) => error instanceof Retryable,
        onFailedAttempt: ({ error }) => {
          // A Retry-After is waited out in #acquire (the host's pause), not here: one mechanism.
          if (error instanceof Retryable) last = error.upstream.message;
        },
      });
    } catch (e) {
      if (e instanceof Retryable) throw e.upstream;
      if (e instanceof UpstreamError) throw e;
      if (e instanceof AbortError && e.originalError instanceof UpstreamError) throw e.originalError;
      if (signal?.aborted) throw aborted(e);
      throw new UpstreamError(source, `${source}: ${path}: ${e instanceof Error ? e.message : String(e)}`, 'network', { cause: e });
    }
  }
}
