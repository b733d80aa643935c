import { closeSync, lstatSync, mkdirSync, openSync, readlinkSync, statSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.ts';

/**
 * The embedded database's folder (PGLITE_DIR), or a file the service keeps beside it
 * (`<PGLITE_DIR>.lock`, `.auth-secret`), cannot be used. An expected user error: its message
 * names the variable, the path, the system's reason and what to do, and is printed alone (it
 * is a ConfigError).
 */
export class PgliteDirError extends ConfigError {
  override name = 'PgliteDirError';
}

/** What to do about an unusable PGLITE_DIR, the end of every PgliteDirError about the folder. */
const WHAT_TO_DO = 'set PGLITE_DIR to a writable folder (it is created when missing), or DATABASE_URL to use PostgreSQL';

/** The system's words for a failed file operation: `ENOENT: no such file or directory, mkdir '/x'`. */
function said(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The error code of a failed file operation (`ENOENT`), or undefined. */
function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * Makes sure the embedded database's folder `dir` (PGLITE_DIR, on disk: not `memory://`) exists
 * and can be written, before PGlite is given it: missing folders on the way are created, one
 * level at a time (mode 0700), and a probe file is written into the folder
 * and removed again.
 *
 * Why not `mkdirSync(dir, {recursive: true})`: Node's recursive mkdir (sync and async, Node 20
 * to 24) retries for ever when mkdir of a child answers ENOENT although its parent exists (a
 * path under /proc, which answers ENOENT to every mkdir): the process spun at 100 % CPU with
 * its event loop blocked, so even its SIGTERM handler never ran. It also reports ENOENT in
 * place of the real error (EROFS, ENOSPC). Here each mkdir runs once, and its error is final.
 * @throws PgliteDirError naming PGLITE_DIR, the folder and the system's reason: the folder
 *   cannot be created (a parent that is a file, a read-only file system, /proc), is not a folder
 *   (an existing regular file), or cannot be written. As root, permission bits do not stop
 *   writes, so a chmod 555 folder passes (PGlite can write there too).
 */
export function preparePgliteDir(dir: string): void {
  const abs = path.resolve(dir);
  const named = `PGLITE_DIR=${dir}`;
  const cannotCreate = (err: unknown, what = said(err)) =>
    new PgliteDirError(`${named}: the embedded database folder cannot be created (${what}): ${WHAT_TO_DO}`);
  /** The entry at `p` (symbolic links followed), or null when there is none, also below a file (ENOTDIR). */
  const entry = (p: string) => {
    try {
      return statSync(p, { throwIfNoEntry: false }) ?? null;
    } catch (err) {
      if (codeOf(err) === 'ENOTDIR') return null;
      throw cannotCreate(err); // EACCES (a parent cannot be searched), ELOOP
    }
  };
  const st = entry(abs);
  if (st && !st.isDirectory())
    throw new PgliteDirError(
      `${named}: the embedded database folder is ${st.isFile() ? 'a regular file, not a folder' : 'not a folder'}: ${WHAT_TO_DO}`,
    );
  if (!st) {
    // The folders that are missing, from the nearest existing one down to `abs`.
    const missing: string[] = [];
    for (let at = abs; ;) {
      const s = entry(at);
      if (s) {
        if (!s.isDirectory()) throw cannotCreate(null, `${at} is a file, not a folder`);
        break;
      }
      missing.unshift(at);
      const parent = path.dirname(at);
      if (parent === at) break; // the root of a drive that does not exist (Windows)
      at = parent;
    }
    for (const d of missing) {
      try {
        mkdirSync(d, { mode: 0o700 });
      } catch (err) {
        // Made meanwhile by another process: fine when it is a folder.
        if (codeOf(err) === 'EEXIST' && entry(d)?.isDirectory()) continue;
        // A symbolic link whose target is missing (an unmounted disk): say where it points.
        let link: string | null = null;
        try {
          if (lstatSync(d).isSymbolicLink()) link = readlinkSync(d);
        } catch {
          // Nothing there: the mkdir's own error says it.
        }
        throw cannotCreate(err, link === null ? said(err) : `${d} is a symbolic link to ${link}, which does not exist`);
      }
    }
  }
  // PGlite's own errors on a folder it cannot write are no help ("Failed query: CREATE SCHEMA
  // ..."): one file written and removed says it first.
  const probe = path.join(abs, `.write-probe-${process.pid}`);
  try {
    // 'wx': never follows a link planted under that name (nor truncates what it points to).
    closeSync(openSync(probe, 'wx', 0o600));
    unlinkSync(probe);
  } catch (err) {
    throw new PgliteDirError(`${named}: the embedded database folder cannot be written (${said(err)}): ${WHAT_TO_DO}`);
  }
}

/**
 * The error for a file the service keeps beside the embedded database's folder (`file`, e.g.
 * `<PGLITE_DIR>.lock` or `.auth-secret`) that cannot be written or read: it names PGLITE_DIR, the file
 * and the system's reason, and says that the folder holding PGLITE_DIR must be writable too.
 */
export function pgliteSiblingError(dir: string, file: string, err: unknown): PgliteDirError {
  return new PgliteDirError(
    `PGLITE_DIR=${dir}: ${file}, kept beside the embedded database folder, cannot be used (${said(err)}): ` +
      'set PGLITE_DIR to a folder whose parent folder is writable too, or DATABASE_URL to use PostgreSQL',
  );
}
