import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Config, ConfigError } from '../config.ts';

/**
 * The embedded identity provider's secret: AUTH_SECRET, or one generated at first start and
 * kept beside the PGlite database (in memory for `memory://`).
 * @throws ConfigError when DATABASE_URL is set without AUTH_SECRET (instances must agree on it).
 */
export function embeddedAuthSecret(config: Config): string {
  if (config.AUTH_SECRET) return config.AUTH_SECRET;
  if (config.DATABASE_URL) {
    // The JWT signing key and sessions are encrypted with the secret and stored in the shared
    // database: a secret generated per start would orphan them, and instances must agree.
    throw new ConfigError(
      'AUTH_SECRET: required (>= 32 characters) when DATABASE_URL is set and the embedded identity provider is used (AUTH_ISSUER unset)',
    );
  }
  if (config.PGLITE_DIR.startsWith('memory://')) return randomBytes(32).toString('base64url');
  const file = path.join(path.dirname(config.PGLITE_DIR), 'auth-secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(path.dirname(file), { recursive: true });
  const s = randomBytes(32).toString('base64url');
  writeFileSync(file, s, { mode: 0o600 });
  return s;
}
