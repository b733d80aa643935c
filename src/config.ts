import { z } from 'zod';
import { accessSync, constants, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** Repository root (one level above src/). */
export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const isoDate = /^\d{4}-\d{2}-\d{2}$/;

/** An RFC 1123 host name (labels of letters, digits and hyphens, not starting or ending with a hyphen). */
const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;

/**
 * Why `v` is not a usable listening address (an IPv4/IPv6 address or a host name), or null.
 * A dotted all-numeric value is judged as an IPv4 address (`999.1.1.1` is not a host name).
 */
function hostProblem(v: string): string | null {
  if (isIP(v)) return null;
  if (/^[\d.]+$/.test(v)) return `'${v}' is not a valid IPv4 address (each of the four parts is 0..255); use e.g. 127.0.0.1, 0.0.0.0 or ::`;
  if (!HOST_NAME.test(v)) return `'${v}' is neither an IP address nor a host name; use e.g. 127.0.0.1, 0.0.0.0, :: or localhost`;
  return null;
}

/** Why one TRUST_PROXY entry is not an IP address or CIDR block (`10.0.0.0/8`, `fd00::/8`), or null. */
function proxyEntryProblem(entry: string): string | null {
  const [addr, prefix, extra] = entry.split('/');
  const family = isIP(addr ?? '');
  if (!family || extra !== undefined) return `'${entry}' is not an IP address or CIDR block`;
  if (prefix === undefined) return null;
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return `'${entry}' has an invalid prefix length (0..${max})`;
  return null;
}

/**
 * Why `dir` is not a readable folder holding the dataset (the `prices/` folder and
 * `fear_greed.csv`, see data/SOURCES.md), or null.
 */
function dataDirProblem(dir: string): string | null {
  const readable = (p: string, kind: 'dir' | 'file'): boolean => {
    try {
      const st = statSync(p);
      if (kind === 'dir' ? !st.isDirectory() : !st.isFile()) return false;
      accessSync(p, constants.R_OK | (kind === 'dir' ? constants.X_OK : 0));
      return true;
    } catch {
      return false;
    }
  };
  if (!readable(dir, 'dir')) return `'${dir}' is not an existing, readable folder; unset it to use the bundled dataset (data/)`;
  for (const [rel, kind] of [
    ['prices', 'dir'],
    ['fear_greed.csv', 'file'],
  ] as const)
    if (!readable(path.join(dir, rel), kind))
      return `'${dir}' does not hold the dataset (no readable ${rel}${kind === 'dir' ? '/' : ''}); point it at a folder laid out like data/ (see data/SOURCES.md) or unset it`;
  return null;
}

/** A zod string checked by `problem` (null = valid), the message carrying what to do. */
const checked = (problem: (v: string) => string | null) =>
  z.string().superRefine((v, ctx) => {
    const p = problem(v);
    if (p) ctx.addIssue({ code: 'custom', message: p });
  });

/** An upstream base URL (http or https). */
const UpstreamUrl = z
  .string()
  .regex(/^https?:\/\/[^\s]+$/, 'must be an http:// or https:// base URL, e.g. http://127.0.0.1:8080')
  .optional();

/**
 * The environment schema. Every variable is optional and has a default that runs the
 * service on the bundled dataset and the embedded PGlite database.
 */
const EnvSchema = z.object({
  PORT: z.coerce
    .number({ error: 'must be a port number 0..65535' })
    .int({ error: 'must be a port number 0..65535' })
    .min(0, { error: 'must be a port number 0..65535' })
    .max(65535, { error: 'must be a port number 0..65535' })
    .default(3000),
  /** Interface to listen on: an IPv4/IPv6 address or a host name. */
  HOST: checked(hostProblem).default('127.0.0.1'),
  /** PostgreSQL URL; when unset the embedded PGlite database in PGLITE_DIR is used. */
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    // What pg's connection-string parser (new URL) reads: a bad port or host fails here, not at the first query.
    .refine(
      (u) => URL.canParse(u),
      'is not a valid URL (check the host, the port number and that a password with @, / or : is percent-encoded)',
    )
    .optional(),
  /** Folder of the embedded PGlite database (created at first start); `memory://` keeps it in memory. */
  PGLITE_DIR: z
    .string()
    .min(1)
    .default(path.join(ROOT_DIR, '.data', 'pglite')),
  /** Folder of the market dataset (see data/SOURCES.md). */
  DATA_DIR: checked(dataDirProblem).default(path.join(ROOT_DIR, 'data')),
  /** Serve the state as of this UTC day (YYYY-MM-DD); default: the newest date in the dataset. */
  AS_OF: z
    .string()
    .regex(isoDate, 'must be a date YYYY-MM-DD')
    // Date.parse rolls 2025-02-30 over to March 2: the day must read back as itself.
    // The value is named (a day is no secret), in the API's words for the same refusal.
    .refine(
      (s) => {
        const t = Date.parse(`${s}T00:00:00Z`);
        return !Number.isNaN(t) && new Date(t).toISOString().slice(0, 10) === s;
      },
      { error: (iss) => `${String(iss.input)} is not a calendar day: give a day that exists, YYYY-MM-DD` },
    )
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Redis URL for shared rate limits across instances; unset = per-instance memory limits. */
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  /**
   * Prefix of every Redis key the service writes (rate-limit counters, failed-auth budgets,
   * revocation markers, the tier epoch: ioredis `keyPrefix`), so that several deployments or
   * test runs can share one Redis without counting into each other's budgets. Every instance of
   * one deployment must use the same prefix.
   */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1-64 characters of letters, digits, and _ . : - (e.g. market-intel:)')
    .default('market-intel:'),
  /**
   * Proxies whose X-Forwarded-For is trusted (comma-separated IPs or CIDRs, e.g.
   * `127.0.0.1,10.0.0.0/8`); unset = the socket address is the client.
   */
  TRUST_PROXY: checked((v) => {
    const entries = v.split(',').map((s) => s.trim());
    if (entries.some((e) => e === '')) return `'${v}' has an empty entry; list IPs or CIDRs separated by commas, e.g. 127.0.0.1,10.0.0.0/8`;
    const bad = entries.map(proxyEntryProblem).filter((p) => p !== null);
    return bad.length ? `${bad.join('; ')}; list IPs or CIDRs separated by commas, e.g. 127.0.0.1,10.0.0.0/8` : null;
  }).optional(),
  /** Public origin of this service (issuer of the embedded identity provider's JWTs). */
  PUBLIC_URL: z.string().url('must be a URL like http://127.0.0.1:3000').optional(),
  /**
   * Issuer of an external identity provider (Auth0, Keycloak, Supabase, ...): its JWKS is
   * found by OIDC discovery at `<issuer>/.well-known/openid-configuration`. Unset = embedded.
   */
  AUTH_ISSUER: z.string().url('must be the issuer URL of the identity provider').optional(),
  /** Expected `aud` of the JWTs. */
  AUTH_AUDIENCE: z.string().min(1).default('market-intel-api'),
  /** Secret of the embedded identity provider (>= 32 chars); unset = generated once and kept beside the database. */
  AUTH_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  /**
   * Extra host names the MCP endpoint accepts in `Host` and `Origin` (comma-separated, e.g.
   * `mcp.example.com`), besides localhost, 127.0.0.1, ::1 and PUBLIC_URL's host: DNS-rebinding
   * protection.
   */
  MCP_ALLOWED_HOSTS: z.string().min(1).optional(),
  /**
   * Bounded waits on the dependencies (README, "Dependencies and timeouts"), in ms. Redis: how
   * long one command may wait for its reply, and one connection attempt; past either the rate
   * limiter counts in per-instance memory.
   */
  REDIS_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(10).max(60_000).default(250),
  REDIS_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  /**
   * PostgreSQL: waiting for a pooled connection (or a new one), and for the reply to one query
   * (client side, also when the server stalls); past either the request is answered 503.
   */
  DB_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(10).max(60_000).default(700),
  DB_QUERY_TIMEOUT_MS: z.coerce.number().int().min(10).max(600_000).default(700),
  /** PostgreSQL server side: statement_timeout, lock_timeout and idle_in_transaction_session_timeout of each session. */
  DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(10).max(600_000).default(600),
  DB_LOCK_TIMEOUT_MS: z.coerce.number().int().min(10).max(600_000).default(500),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: z.coerce.number().int().min(10).max(600_000).default(5000),
  /**
   * Origins allowed to call /api/v1 from a browser (CORS): `*` (any; API keys and JWTs travel
   * in the Authorization header, never in cookies) or a comma-separated list of origins such as
   * `https://app.example.com,http://localhost:5173`.
   */
  CORS_ORIGINS: z
    .string()
    .min(1)
    .refine(
      (v) => v.trim() === '*' || v.split(',').every((o) => /^https?:\/\/[^/\s?#]+$/.test(o.trim())),
      'must be * or a comma-separated list of origins like https://app.example.com (scheme and host, no path)',
    )
    .default('*'),
  /** Serve Prometheus metrics at /metrics (`on`, `off`). */
  METRICS: z.enum(['on', 'off'], { error: 'must be on or off' }).default('on'),
  /**
   * Live mode (docs/live-data.md): `1`/`on` fetches candles, Fear & Greed, funding and chain
   * metrics from public APIs on a schedule, stores them and recomputes; `0`/`off` (default)
   * serves the bundled dataset with no network call at all.
   */
  LIVE: z
    .enum(['0', '1', 'off', 'on', 'false', 'true'], { error: 'must be 1 or 0 (on or off)' })
    .default('0')
    .transform((v) => v === '1' || v === 'on' || v === 'true'),
  /** Live ingest: how long one upstream request may take, ms, and how often a failed one is retried (429, 5xx, network). */
  INGEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  INGEST_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
  /** Live ingest: requests per minute to any one upstream host. */
  INGEST_HOST_BUDGET_PER_MINUTE: z.coerce.number().int().min(1).max(6000).default(60),
  /** Base URLs of the upstream APIs (a mirror, or a local server in tests); unset = the public hosts (docs/live-data.md). */
  UPSTREAM_BINANCE_URL: UpstreamUrl,
  UPSTREAM_BINANCE_FUTURES_URL: UpstreamUrl,
  UPSTREAM_OKX_URL: UpstreamUrl,
  UPSTREAM_HYPERLIQUID_URL: UpstreamUrl,
  UPSTREAM_ALTERNATIVE_ME_URL: UpstreamUrl,
  UPSTREAM_DEFILLAMA_URL: UpstreamUrl,
  UPSTREAM_GROWTHEPIE_URL: UpstreamUrl,
  UPSTREAM_HYPERLIQUID_STATS_URL: UpstreamUrl,
  UPSTREAM_SOLANA_RPC_URL: UpstreamUrl,
  /** How often per-key usage counters are written to the database, ms. */
  USAGE_FLUSH_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  /**
   * How many active API keys each instance keeps verified in memory (least recently used out
   * first; services/keys.ts). Above the number of keys in use, every request past the first
   * of a key needs no database query.
   */
  KEY_CACHE_MAX: z.coerce.number().int().min(1).max(10_000_000).default(100_000),
  /**
   * Most keys whose usage one statement of the flush writes; the flush yields to the event
   * loop between two statements (services/usage.ts), so a flush over many keys does not stall
   * requests. 50 (services/usage.ts DEFAULT_USAGE_FLUSH_CHUNK): on PGlite at 10,000 keys a
   * statement holds the main thread ~1.5 ms (250: ~3-4.6 ms), at about twice the whole
   * flush's cost, which the pacing (USAGE_FLUSH_SHARE) spreads (docs/benchmarks.md,
   * "Thirteenth session").
   */
  USAGE_FLUSH_CHUNK: z.coerce.number().int().min(1).max(100_000).default(50),
  /**
   * Most of the wall time the periodic usage flush may spend in its statements, in
   * [0.01, 1]: after each statement it waits in proportion to the statement's latency
   * (services/usage.ts DEFAULT_USAGE_FLUSH_SHARE, 0.2). On PGlite that latency is main-thread
   * time; on PostgreSQL it is mostly the round trip. 1 writes the statements back to back.
   */
  USAGE_FLUSH_SHARE: z.coerce.number().min(0.01).max(1).default(0.2),
  /**
   * Longest graceful shutdown after SIGTERM or SIGINT, ms: requests in flight finish, the last
   * usage counts are written, connections close; past it the process exits 1 with a log line
   * (a client stalled mid-request would otherwise hold it up to Node's 300 s request timeout).
   * 10 s fits inside the 30 s a container orchestrator waits by default before SIGKILL.
   */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
});

/** The validated configuration, read once at start. */
export type Config = z.infer<typeof EnvSchema>;

/** Raised when an environment variable is invalid; the message names the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** The variables that have a command-line flag (src/cli.ts), with the flag. */
const FLAG_OF: Record<string, string> = { PORT: '--port', HOST: '--host', AS_OF: '--as-of', DATA_DIR: '--data-dir' };

/**
 * Parses and validates the configuration from `env` (default `process.env`), with
 * `overrides` (e.g. CLI flags) taking precedence. Empty strings count as unset.
 * @throws ConfigError naming every invalid variable.
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: Partial<Record<keyof Config, string>> = {},
): Config {
  const raw: Record<string, string | undefined> = {};
  for (const key of Object.keys(EnvSchema.shape)) {
    const v = overrides[key as keyof Config] ?? env[key];
    raw[key] = v === '' ? undefined : v;
  }
  const parsed = EnvSchema.safeParse(raw);
  if (!parsed.success) {
    const names = [...new Set(parsed.error.issues.map((i) => String(i.path[0])))];
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    // Only PORT, HOST, AS_OF and DATA_DIR have a command-line flag (src/cli.ts).
    const withFlag = names.filter((n) => n in FLAG_OF).map((n) => `${FLAG_OF[n]} for ${n}`);
    const where = withFlag.length ? `in the environment or with its command-line flag (${withFlag.join(', ')})` : 'in the environment';
    throw new ConfigError(
      `Invalid configuration:\n  ${lines.join('\n  ')}\nFix ${names.length > 1 ? 'these variables' : 'this variable'} ${where} and start again.`,
    );
  }
  return parsed.data;
}
