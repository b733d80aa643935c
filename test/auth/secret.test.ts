import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { authSecretFile, embeddedAuthSecret } from '../../src/auth/secret.ts';
import { testConfig } from '../helpers/env.ts';

// The embedded identity provider's generated secret: kept beside its database under the
// database's own name, and never read from a file another user could have put there.

const root = mkdtempSync(path.join(tmpdir(), 'auth-secret-'));
after(() => rmSync(root, { recursive: true, force: true }));
const config = (dir: string) => testConfig({ PGLITE_DIR: dir, AUTH_SECRET: '', DATABASE_URL: '' });
const POSIX = process.platform !== 'win32';

test('generated once beside the database, named after it, mode 0600; the same on the next start', () => {
  const db = path.join(root, 'a', 'pglite');
  const s = embeddedAuthSecret(config(db));
  const file = authSecretFile(db);
  assert.equal(file, `${db}.auth-secret`);
  assert.equal(readFileSync(file, 'utf8'), s);
  assert.ok(s.length >= 32);
  if (POSIX) assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.equal(embeddedAuthSecret(config(db)), s);
  // Two databases in one folder do not share a secret.
  assert.notEqual(embeddedAuthSecret(config(path.join(root, 'a', 'other'))), s);
});

test('a secret file readable by others, too short, or a link is refused with what to do', { skip: !POSIX }, () => {
  const cases: [string, (file: string) => void, RegExp][] = [
    ['mode', (f) => writeFileSync(f, 'x'.repeat(40), { mode: 0o644 }), /is readable or writable by others \(mode 644; chmod 600 it\)/],
    ['short', (f) => writeFileSync(f, 'short', { mode: 0o600 }), /holds fewer than 32 characters/],
    [
      'link',
      (f) => {
        writeFileSync(`${f}.target`, 'y'.repeat(40), { mode: 0o600 });
        symlinkSync(`${f}.target`, f);
      },
      /is not a regular file/,
    ],
  ];
  cases.push(['broken link', (f) => symlinkSync(path.join(root, 'nowhere'), f), /is not a regular file/]);
  for (const [name, plant, why] of cases) {
    const db = path.join(root, `bad-${name}`, 'pglite');
    mkdirSync(path.dirname(db), { recursive: true });
    plant(authSecretFile(db));
    assert.throws(
      () => embeddedAuthSecret(config(db)),
      (e: Error) => e.name === 'ConfigError' && why.test(e.message) && /Remove it .* or set AUTH_SECRET/.test(e.message),
      name,
    );
  }
  assert.equal(existsSync(path.join(root, 'nowhere')), false, 'nothing written through the link');
});

test(
  'an existing database keeps its secret from the former shared name (auth-secret in its folder); a new one does not read it',
  { skip: !POSIX },
  () => {
    const dir = path.join(root, 'legacy');
    const db = path.join(dir, 'pglite');
    mkdirSync(db, { recursive: true });
    const legacy = path.join(dir, 'auth-secret');
    writeFileSync(legacy, 'L'.repeat(43), { mode: 0o600 });
    assert.equal(embeddedAuthSecret(config(db)), 'L'.repeat(43));
    assert.equal(readFileSync(authSecretFile(db), 'utf8'), 'L'.repeat(43));
    assert.equal(statSync(authSecretFile(db)).mode & 0o777, 0o600);
    // A database not created yet gets its own secret, whatever lies in the folder.
    const fresh = path.join(dir, 'fresh');
    assert.notEqual(embeddedAuthSecret(config(fresh)), 'L'.repeat(43));
    // A legacy file others can read is not trusted for an existing database either.
    const db2 = path.join(root, 'legacy2', 'pglite');
    mkdirSync(db2, { recursive: true });
    writeFileSync(path.join(root, 'legacy2', 'auth-secret'), 'P'.repeat(43), { mode: 0o644 });
    chmodSync(path.join(root, 'legacy2', 'auth-secret'), 0o644);
    assert.throws(() => embeddedAuthSecret(config(db2)), /readable or writable by others/);
    assert.equal(existsSync(authSecretFile(db2)), false);
  },
);
