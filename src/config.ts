import { z } from 'zod';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** Repository root (one level above src/). */
export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const isoDate = /^\d{4}-\d{2}-\d{2}$/;

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
  HOST: z.string().min(1).default('127.0.0.1'),
  /** PostgreSQL URL; when unset the embedded PGlite database in PGLITE_DIR is used. */
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  /** Folder of the embedded PGlite database (created at first start); `memory://` keeps it in memory. */
  PGLITE_DIR: z
    .string()
    .min(1)
    .default(path.join(ROOT_DIR, '.data', 'pglite')),
  /** Folder of the market dataset (see data/SOURCES.md). */
  DATA_DIR: z.string().min(1).default(path.join(ROOT_DIR, 'data')),
  /** Serve the state as of this UTC day (YYYY-MM-DD); default: the newest date in the dataset. */
  AS_OF: z
    .string()
    .regex(isoDate, 'must be a date YYYY-MM-DD')
    .refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)), 'is not a valid calendar date')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Redis URL for shared rate limits across instances; unset = per-instance memory limits. */
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  /**
   * Proxies whose X-Forwarded-For is trusted (comma-separated IPs or CIDRs, e.g.
   * `127.0.0.1,10.0.0.0/8`); unset = the socket address is the client.
   */
  TRUST_PROXY: z.string().min(1).optional(),
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
  /** How often per-key usage counters are written to the database, ms. */
  USAGE_FLUSH_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
});

/** The validated configuration, read once at start. */
export type Config = z.infer<typeof EnvSchema>;

/** Raised when an environment variable is invalid; the message names the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

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
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  return parsed.data;
}
