import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { embeddedAuthSecret } from '../../src/auth/secret.ts';
import { ConfigError } from '../../src/config.ts';
import { openDatabase } from '../../src/store/db.ts';
import { PgliteDirError, preparePgliteDir } from '../../src/store/pglite-dir.ts';
import { testConfig } from '../helpers/env.ts';

// The embedded database's folder (PGLITE_DIR) is created and checked before PGlite gets it:
// a folder that cannot be used is one PgliteDirError (a ConfigError: printed alone, no stack)
// naming the variable, the path, the system's reason and what to do. The paths under /proc,
// where Node's recursive mkdir spun for ever, are run as child processes (test/cli.test.ts,
// test/mcp/mcp-stdio.test.ts): a regression there would block this process.

const root = mkdtempSync(path.join(tmpdir(), 'pglite-dir-'));
after(() => rmSync(root, { recursive: true, force: true }));
const POSIX = process.platform !== 'win32';

/** Asserts that `fn` throws a PgliteDirError whose message matches every one of `res`. */
function refuses(fn: () => unknown, ...res: RegExp[]): void {
  assert.throws(fn, (e: Error) => {
    assert.ok(e instanceof PgliteDirError && e instanceof ConfigError, `${e.name}: ${e.message}`);
    for (const re of res) assert.match(e.message, re);
    return true;
  });
}

test('a missing folder is created with its missing parents (mode 0700); no probe file stays behind', () => {
  const dir = path.join(root, 'new', 'a', 'pglite');
  preparePgliteDir(dir);
  assert.ok(statSync(dir).isDirectory());
  if (POSIX) for (const d of [path.join(root, 'new'), path.join(root, 'new', 'a'), dir]) assert.equal(statSync(d).mode & 0o777, 0o700, d);
  assert.deepEqual(readdirSync(dir), []);
  // An existing folder is left as it is, and checked again.
  writeFileSync(path.join(dir, 'PG_VERSION'), '17');
  preparePgliteDir(`${dir}/`);
  assert.deepEqual(readdirSync(dir), ['PG_VERSION']);
});

test('a regular file, a path under a file and a dangling symbolic link are refused with what to do', { skip: !POSIX }, () => {
  const file = path.join(root, 'a-file');
  writeFileSync(file, 'x');
  const todo = /: set PGLITE_DIR to a writable folder \(it is created when missing\), or DATABASE_URL to use PostgreSQL$/;
  refuses(
    () => preparePgliteDir(file),
    new RegExp(`^PGLITE_DIR=${file}: the embedded database folder is a regular file, not a folder`),
    todo,
  );
  refuses(
    () => preparePgliteDir(path.join(file, 'db')),
    new RegExp(`^PGLITE_DIR=${file}/db: the embedded database folder cannot be created \\(${file} is a file, not a folder\\)`),
    todo,
  );
  const link = path.join(root, 'dangling');
  symlinkSync(path.join(root, 'unmounted'), link);
  for (const dir of [link, path.join(link, 'db')])
    refuses(
      () => preparePgliteDir(dir),
      new RegExp(
        `^PGLITE_DIR=${dir}: the embedded database folder cannot be created \\(${link} is a symbolic link to ${root}/unmounted, which does not exist\\)`,
      ),
      todo,
    );
  assert.equal(existsSync(path.join(root, 'unmounted')), false, 'nothing created through the link');
});

test(
  'a read-only folder is refused before PGlite opens it (skipped as root: permissions do not stop root)',
  {
    skip: !POSIX || process.getuid?.() === 0 ? 'POSIX only, and not as root (root writes through mode 0555)' : false,
  },
  () => {
    const dir = path.join(root, 'read-only');
    mkdirSync(dir, { mode: 0o555 });
    refuses(() => preparePgliteDir(dir), /^PGLITE_DIR=.*: the embedded database folder cannot be written \(EACCES: /);
    refuses(() => preparePgliteDir(path.join(dir, 'db')), /^PGLITE_DIR=.*: the embedded database folder cannot be created \(EACCES: /);
  },
);

test('openDatabase and the auth secret refuse an unusable PGLITE_DIR with the same error; a lock path taken by a folder is named', async () => {
  const file = path.join(root, 'db-file');
  writeFileSync(file, 'x');
  await assert.rejects(openDatabase({ pgliteDir: file }), (e: Error) => e instanceof PgliteDirError && /is a regular file/.test(e.message));
  assert.throws(
    () => embeddedAuthSecret(testConfig({ PGLITE_DIR: file, AUTH_SECRET: '', DATABASE_URL: '' })),
    (e: Error) => e instanceof PgliteDirError && /^PGLITE_DIR=.*: the embedded database folder is a regular file/.test(e.message),
  );
  assert.equal(existsSync(`${file}.auth-secret`), false);
  // The files beside the folder: a folder named like the lock file.
  const dir = path.join(root, 'locked');
  mkdirSync(`${dir}.lock`, { recursive: true });
  await assert.rejects(openDatabase({ pgliteDir: dir }), (e: Error) => {
    assert.ok(e instanceof PgliteDirError, String(e));
    assert.match(
      e.message,
      new RegExp(
        `^PGLITE_DIR=${dir}: ${dir}\\.lock, kept beside the embedded database folder, cannot be used \\(EISDIR: .*\\): set PGLITE_DIR to a folder whose parent folder is writable too, or DATABASE_URL to use PostgreSQL$`,
      ),
    );
    return true;
  });
});
