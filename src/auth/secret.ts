import { randomBytes } from 'node:crypto';
import { existsSync, lstatSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Config, ConfigError } from '../config.ts';
import { pgliteSiblingError, preparePgliteDir } from '../store/pglite-dir.ts';

/** Shortest secret accepted (as AUTH_SECRET's own bound in config.ts). */
const MIN_SECRET_LENGTH = 32;

/**
 * The file that keeps the generated secret of the PGlite database at `pgliteDir`: beside it,
 * named after it (`.data/pglite` -> `.data/pglite.auth-secret`), so that databases in one
 * folder (e.g. /tmp) never share a secret or read one that someone else put there.
 */
export function authSecretFile(pgliteDir: string): string {
  return `${path.resolve(pgliteDir)}.auth-secret`;
}

/**
 * The secret in `file`, once it is known to be this process user's own: a regular file (not a
 * symbolic link), owned by this user, readable by no one else (mode 0600 or stricter), and at
 * least 32 characters. Ownership and mode are not checked on Windows.
 * @throws ConfigError naming the file and what to do when it fails a check.
 */
function readOwnSecret(file: string): string {
  const st = lstatSync(file);
  const unsafe = (why: string) =>
    new ConfigError(
      `AUTH_SECRET: the secret file ${file} ${why}; it is not used. Remove it (a new one is generated; sessions and signed-in users' tokens end) or set AUTH_SECRET`,
    );
  if (!st.isFile()) throw unsafe('is not a regular file');
  if (process.platform !== 'win32') {
    if (typeof process.getuid === 'function' && st.uid !== process.getuid()) throw unsafe('belongs to another user');
    if ((st.mode & 0o077) !== 0) throw unsafe(`is readable or writable by others (mode ${(st.mode & 0o777).toString(8)}; chmod 600 it)`);
  }
  const s = readFileSync(file, 'utf8').trim();
  if (s.length < MIN_SECRET_LENGTH) throw unsafe(`holds fewer than ${MIN_SECRET_LENGTH} characters`);
  return s;
}

/**
 * The embedded identity provider's secret: AUTH_SECRET, or one generated at first start and
 * kept in {@link authSecretFile} beside the PGlite database (in memory for `memory://`). A
 * database made before the file had its own name kept it as `auth-secret` in the folder that
 * holds the database: that file is copied to the new name when it passes the same checks.
 * When the file must be written, the database's folder is created first when missing
 * (preparePgliteDir), so that the file has a folder to sit beside; a start that finds the file
 * leaves the folder's check to openDatabase.
 * @throws ConfigError when DATABASE_URL is set without AUTH_SECRET (instances must agree on
 *   it), or when the secret file is not this user's own (see readOwnSecret); PgliteDirError (a
 *   ConfigError naming PGLITE_DIR) when the folder cannot be created or written, or the
 *   secret file beside it cannot be written.
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
  const dir = config.PGLITE_DIR;
  const file = authSecretFile(dir);
  const existed = existsSync(dir);
  const fileError = (err: unknown) => pgliteSiblingError(dir, file, err);
  // lstat, not exists: a link (even a broken one) is there, and refused by readOwnSecret.
  const present = (f: string) => {
    try {
      return lstatSync(f, { throwIfNoEntry: false }) !== undefined;
    } catch (err) {
      // A folder on the way that is a file (ENOTDIR), or cannot be searched: reported as the
      // database folder's problem when it is one (preparePgliteDir throws), else as the file's.
      preparePgliteDir(dir);
      throw fileError(err);
    }
  };
  // A warm start reads the file and leaves the folder to openDatabase, which checks it anyway.
  if (present(file)) return readOwnSecret(file);
  // The database's folder before the file is written (created with its parents, and checked
  // for writing): the secret file goes beside it, and a folder that cannot be used is
  // reported as such, not as a failed write of the secret.
  preparePgliteDir(dir);
  const legacy = path.join(path.dirname(path.resolve(dir)), 'auth-secret');
  // Only for a database that exists: its stored keys were encrypted with that secret.
  const s = present(legacy) && existed ? readOwnSecret(legacy) : randomBytes(32).toString('base64url');
  try {
    // 'wx': fails rather than follow a file or link created meanwhile.
    writeFileSync(file, s, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    throw fileError(err);
  }
  return s;
}
