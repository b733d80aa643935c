import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { ConfigError, loadConfig, ROOT_DIR } from '../src/config.ts';

test('defaults run on the bundled dataset and embedded PGlite', () => {
  const c = loadConfig({});
  assert.equal(c.PORT, 3000);
  assert.equal(c.DATABASE_URL, undefined);
  assert.match(c.DATA_DIR, /data$/);
  assert.equal(c.REDIS_KEY_PREFIX, 'market-intel:');
});

test('a bad value names the variable', () => {
  for (const [k, v] of [
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['AS_OF', '2024-13-45'],
    ['AS_OF', 'yesterday'],
    // Date.parse would roll these over to the next month.
    ['AS_OF', '2025-02-30'],
    ['AS_OF', '2023-02-29'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', 'postgres://u@127.0.0.1:notaport/db'],
    ['LOG_LEVEL', 'loud'],
    ['REDIS_KEY_PREFIX', 'has space:'],
  ]) {
    assert.throws(
      () => loadConfig({ [k!]: v }),
      (e: Error) => e instanceof ConfigError && e.message.includes(k!),
      `${k}=${v}`,
    );
  }
});

test('AS_OF accepts a leap day and says why a day that does not exist is refused', () => {
  assert.equal(loadConfig({ AS_OF: '2024-02-29' }).AS_OF, '2024-02-29');
  assert.throws(() => loadConfig({ AS_OF: '2025-02-30' }), /AS_OF: 2025-02-30 is not a calendar day: give a day that exists, YYYY-MM-DD/);
});

test('CLI flags override the environment', () => {
  assert.equal(loadConfig({ AS_OF: '2024-01-01' }, { AS_OF: '2023-01-01' }).AS_OF, '2023-01-01');
});

test('the service refuses to start with a bad variable and says which', () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve'], {
    cwd: ROOT_DIR,
    env: { ...process.env, PORT: 'not-a-port' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /PORT/);
});
