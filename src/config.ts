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
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** PostgreSQL URL; when unset the embedded PGlite database in PGLITE_DIR is used. */
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  /** Folder of the embedded PGlite database (created at first start); `memory://` keeps it in memory. */
  PGLITE_DIR: z.string().min(1).default(path.join(ROOT_DIR, '.data', 'pglite')),
  /** Folder of the market dataset (see data/SOURCES.md). */
  DATA_DIR: z.string().min(1).default(path.join(ROOT_DIR, 'data')),
  /** Serve the state as of this UTC day (YYYY-MM-DD); default: the newest date in the dataset. */
  AS_OF: z
    .string()
    .regex(isoDate, 'must be a date YYYY-MM-DD')
    .refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)), 'is not a valid calendar date')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
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
