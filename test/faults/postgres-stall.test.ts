import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { startHarness, type Harness } from '../helpers/harness.ts';
import {
  percentile,
  privateServerUnavailable,
  startPrivatePostgres,
  timedLoad,
  type PrivateServer,
  type Timed,
} from '../helpers/faults.ts';

/**
 * A PostgreSQL that stalls (SIGSTOP of the postmaster and every backend: connections stay
 * open, nothing answers) must not hang the API: requests that need the database (a key not
 * in the key cache yet, a JWT caller's plan) get 503 SERVICE_UNAVAILABLE within
 * DB_QUERY_TIMEOUT_MS / DB_CONNECT_TIMEOUT_MS, a key already in the key cache and public
 * market data keep being served from memory, /readyz answers within a second, and all of it
 * recovers after SIGCONT without a restart.
 */
describe('PostgreSQL stalled for 10 s under a running service', () => {
  const skip = privateServerUnavailable('postgres');
  let pg: PrivateServer | undefined;
  let h: Harness | undefined;

  before(async () => {
    if (skip) return;
    pg = await startPrivatePostgres();
    h = await startHarness({ config: { DATABASE_URL: pg.url, PGLITE_DIR: 'memory://' } });
  });
  after(async () => {
    await h?.stop();
    await pg?.stop();
  });

  test(
    'uncached keys and JWT requests get 503 within 1 s, cached keys and public requests 200, /readyz 503 within 1 s; all recover after SIGCONT',
    { skip: skip ?? false },
    async () => {
      const { key, jwt } = await h!.keyFor('api');
      // A second key, never used before the stall: not in the key cache, so it needs the database.
      const { key: unseen } = await h!.keyFor('api');
      const status = (path: string, token?: string) => async () => (await h!.request('GET', path, { token })).status;
      const readyz = async () => (await h!.app.inject({ method: 'GET', url: '/readyz' })).statusCode;
      assert.equal(await status('/api/v1/signals', key)(), 200);
      assert.equal(await status('/api/v1/thesis', jwt)(), 200);
      assert.equal(await readyz(), 200);

      pg!.stall();
      let results: Timed[];
      try {
        results = await timedLoad(
          [
            { label: 'keyed', send: status('/api/v1/signals', key) },
            { label: 'uncached', send: status('/api/v1/signals', unseen) },
            { label: 'jwt', send: status('/api/v1/thesis', jwt) },
            { label: 'anonymous', send: status('/api/v1/regime') },
            { label: 'readyz', send: readyz },
          ],
          10_000,
          50,
          5_000,
        );
      } finally {
        pg!.resume();
      }
      const by = (label: string) => results.filter((r) => r.label === label);
      const ms = results.map((r) => r.ms);
      const p99 = percentile(ms, 99);
      const line = (rs: Timed[]) => {
        const statuses: Record<string, number> = {};
        for (const r of rs) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        const t = rs.map((r) => r.ms);
        return `${rs.length} requests, statuses ${JSON.stringify(statuses)}, p50 ${percentile(t, 50).toFixed(0)} ms, p99 ${percentile(t, 99).toFixed(0)} ms`;
      };
      for (const l of ['keyed', 'uncached', 'jwt', 'anonymous', 'readyz']) console.log(`PostgreSQL stall, ${l}: ${line(by(l))}`);
      const hung = results.filter((r) => r.status === 0);
      assert.equal(hung.length, 0, `${hung.length} requests did not answer within 5 s`);
      assert.ok(p99 < 1000, `p99 ${p99.toFixed(0)} ms >= 1 s`);
      // Per kind too: an uncached key (a look-up on the stalled database) gets its 503 within the bound.
      for (const l of ['keyed', 'uncached', 'anonymous']) {
        const p = percentile(
          by(l).map((r) => r.ms),
          99,
        );
        assert.ok(p < 1000, `${l}: p99 ${p.toFixed(0)} ms >= 1 s (${line(by(l))})`);
      }
      assert.ok(Math.max(...by('readyz').map((r) => r.ms)) < 1000, '/readyz answers within 1 s');
      // Requests sent in the last second may be answered after SIGCONT: judge the ones before.
      const during = (label: string) => by(label).filter((r) => r.at < 9_000);
      for (const l of ['uncached', 'jwt', 'readyz']) {
        const rs = during(l);
        assert.ok(rs.length >= 5, `${l}: ${line(rs)}`);
        assert.ok(
          rs.every((r) => r.status === 503),
          `${l}: 503 while the database is stalled (${line(rs)})`,
        );
      }
      assert.ok(
        by('anonymous').every((r) => r.status === 200),
        `public market data is served from memory (${line(by('anonymous'))})`,
      );
      assert.ok(
        by('keyed').every((r) => r.status === 200),
        `a key in the key cache is served without the database (${line(by('keyed'))})`,
      );

      // Recovery without a restart.
      let back = false;
      for (let i = 0; i < 50 && !back; i++) {
        back =
          (await status('/api/v1/signals', unseen)()) === 200 &&
          (await status('/api/v1/thesis', jwt)()) === 200 &&
          (await readyz()) === 200;
        if (!back) await sleep(200);
      }
      assert.ok(back, 'the uncached key, JWT requests and /readyz are served again after SIGCONT');
    },
  );
});
