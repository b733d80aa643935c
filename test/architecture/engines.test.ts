import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import semver from 'semver';
import { ROOT_DIR } from '../../src/config.ts';

/**
 * The service supports every Node.js in package.json's `engines.node` (README, "Two commands"):
 * each package it installs for production (package-lock.json entries without `dev`) must accept
 * the oldest of those versions and the first release of each LTS line we support (22, 24). A
 * transitive dependency that moves to `node >= 22` fails this test, so the pin or override that
 * keeps it compatible is chosen on purpose (package.json `overrides`).
 */

interface LockEntry {
  dev?: boolean;
  version?: string;
  engines?: { node?: string } | string[];
}

const pkg = JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(path.join(ROOT_DIR, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>;
};

test('every production dependency accepts the oldest supported Node.js and the LTS lines 22 and 24', () => {
  const oldest = semver.minVersion(pkg.engines.node);
  assert.ok(oldest, `engines.node "${pkg.engines.node}" names no version`);
  const targets = [oldest.version, '22.12.0', '24.0.0'].filter((v) => semver.satisfies(v, pkg.engines.node));
  assert.ok(targets.includes(oldest.version));
  const refused: string[] = [];
  let checked = 0;
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where === '' || entry.dev) continue;
    const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
    if (!range) continue;
    checked++;
    for (const v of targets) {
      if (!semver.satisfies(v, range)) refused.push(`${where}@${entry.version ?? '?'} needs node ${range}, not ${v}`);
    }
  }
  assert.ok(checked > 20, `only ${checked} production packages declare engines: is package-lock.json complete?`);
  assert.deepEqual(refused, []);
});
