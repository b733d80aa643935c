import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LimitDecision } from '../rate-limit/limiter.ts';

/** How long a scrape waits for the dependency checks, ms. */
export const METRICS_DEPENDENCY_TIMEOUT_MS = 2000;

/** Route label of requests no route matched (unknown paths, malformed URLs). */
export const UNMATCHED = '(unmatched)';
/** Route label of requests the HTTP parser refused before routing (431, 400 for bad bytes). */
export const PROTOCOL_ERROR = '(protocol error)';

/**
 * The service's Prometheus metrics (prom-client), in a registry of their own (one per app):
 * - `http_requests_total{method, route, status_code}` and
 *   `http_request_duration_seconds{method, route, status_code}` (histogram): `route` is the
 *   route template (`/api/v1/signals/:asset`), never the raw path, so the label set is
 *   bounded; requests refused by the HTTP parser count under route `(protocol error)`;
 * - `rate_limit_decisions_total{tier, decision}`: each quota decision of the /api/v1 guard,
 *   `allowed` or `limited`;
 * - `dependency_up{dependency}`: 1 when the database / the market data / Redis answers,
 *   checked at each scrape (at most METRICS_DEPENDENCY_TIMEOUT_MS);
 * - `market_series{state}`: the market series (GET /api/v1/status) that are `fresh`,
 *   `stale` (older than their cadence allows at the reference day) or `empty` (no data), and
 *   `signals_unavailable`: assets not served as current (GET /api/v1/signals `unavailable`),
 *   read at each scrape: `dependency_up{dependency="data"}` says the data can be read, these
 *   say how current it is (live mode with failing sources: stale series and unavailable signals);
 * - Node's process metrics (`process_*`, `nodejs_*`).
 * No label carries a key, a user or an address.
 */
export class HttpMetrics {
  readonly registry = new Registry();
  readonly #requests: Counter<'method' | 'route' | 'status_code'>;
  readonly #duration: Histogram<'method' | 'route' | 'status_code'>;
  readonly #decisions: Counter<'tier' | 'decision'>;

  constructor(
    dependencies: () => Promise<Record<string, boolean | null | undefined>>,
    freshness?: () => { fresh: number; stale: number; empty: number; signalsUnavailable: number },
  ) {
    const registers = [this.registry];
    const children = this.#children;
    this.#requests = new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by method, route template and status code',
      labelNames: ['method', 'route', 'status_code'],
      registers,
      // Requests are counted in a plain number per label set and added here, at each scrape
      // (no label hashing per request).
      collect() {
        for (const c of children.values()) {
          if (c.uncounted > 0) {
            c.count.inc(c.uncounted);
            c.uncounted = 0;
          }
        }
      },
    });
    this.#duration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from request to response, seconds, by method, route template and status code',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.#decisions = new Counter({
      name: 'rate_limit_decisions_total',
      help: 'Rate-limit decisions of the /api/v1 guard, by tier and decision (allowed, limited)',
      labelNames: ['tier', 'decision'],
      registers,
    });
    const up = new Gauge({
      name: 'dependency_up',
      help: 'Whether a dependency answers (1) or not (0), checked at each scrape; absent when not configured',
      labelNames: ['dependency'],
      registers,
      async collect() {
        up.reset();
        let timer: NodeJS.Timeout | undefined;
        const checks = await Promise.race([
          dependencies().catch(() => null),
          new Promise<null>((resolve) => {
            timer = setTimeout(() => resolve(null), METRICS_DEPENDENCY_TIMEOUT_MS);
          }),
        ]).finally(() => clearTimeout(timer));
        for (const [dependency, ok] of Object.entries(checks ?? { database: false, data: false })) {
          if (ok !== null && ok !== undefined) up.set({ dependency }, ok ? 1 : 0);
        }
      },
    });
    if (freshness) {
      const series = new Gauge({
        name: 'market_series',
        help: 'Market series by state at the reference day: fresh, stale (older than their cadence allows) or empty (no data)',
        labelNames: ['state'],
        registers,
        collect() {
          const f = freshness();
          for (const state of ['fresh', 'stale', 'empty'] as const) series.set({ state }, f[state]);
        },
      });
      const unavailable = new Gauge({
        name: 'signals_unavailable',
        help: 'Assets whose signal is not served as current (no or stale prices), as GET /api/v1/signals lists them',
        registers,
        collect() {
          unavailable.set(freshness().signalsUnavailable);
        },
      });
    }
    collectDefaultMetrics({ register: this.registry });
  }

  /**
   * The counter and histogram children of one (method, route, status) label set, bound once:
   * prom-client hashes a label object on every `inc`/`observe`, a bound child does not. The set
   * is small (route templates, never raw paths), so the map stays small.
   */
  readonly #children = new Map<string, { count: { inc(n: number): void }; uncounted: number; time: { observe(v: number): void } }>();
  readonly #decided = new Map<string, { inc(): void }>();

  /** Counts one answered request (`seconds` from arrival to response). */
  observe(method: string, route: string, status: number, seconds: number): void {
    const k = `${method} ${status} ${route}`;
    let c = this.#children.get(k);
    if (!c) {
      const labels = { method, route, status_code: String(status) };
      c = { count: this.#requests.labels(labels), uncounted: 0, time: this.#duration.labels(labels) };
      this.#children.set(k, c);
    }
    c.uncounted += 1;
    c.time.observe(seconds);
  }

  /** Counts one quota decision of the guard. */
  decision(d: LimitDecision): void {
    const decision = d.allowed ? 'allowed' : 'limited';
    const k = `${d.tier} ${decision}`;
    let c = this.#decided.get(k);
    if (!c) this.#decided.set(k, (c = this.#decisions.labels({ tier: d.tier, decision })));
    c.inc();
  }

  /**
   * Adds the request hook (every response of `app`, not-found and framework errors included)
   * and `GET /metrics` (Prometheus text format 0.0.4).
   */
  install(app: FastifyInstance): void {
    app.addHook('onResponse', (req, reply, done) => {
      this.observe(req.method, req.routeOptions.url ?? UNMATCHED, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
    app.get('/metrics', { schema: { hide: true } }, async (_req, reply) =>
      reply
        .header('Cache-Control', 'no-store')
        .type(this.registry.contentType)
        .send(await this.registry.metrics()),
    );
  }
}
