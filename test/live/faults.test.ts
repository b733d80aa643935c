import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { addDays } from '../../src/engine/util.ts';
import { UPSTREAM_NAMES } from '../../src/providers/live/index.ts';
import { createService, type Service } from '../../src/server.ts';
import { testConfig } from '../helpers/env.ts';
import { at, cutDataset, liveEnv } from '../helpers/live.ts';
import { startUpstream, type Fault, type Upstream } from '../helpers/upstream.ts';

// Upstream faults (issue #9): an upstream that hangs, answers garbage or drops the connection
// mid-body leaves the service answering with its last good data, marked stale, and the
// failure on GET /status; when the upstreams return, the next round recovers without a restart.

const CUT = '2025-04-10';

describe('live ingest under upstream faults', () => {
  let upstream: Upstream;
  let svc: Service;
  let dataDir = '';
  let now = at(addDays(CUT, 1)) + 3_600_000;

  before(async () => {
    upstream = await startUpstream();
    upstream.setToday(addDays(CUT, 1));
    dataDir = cutDataset(CUT);
    // Short bounds: one 400 ms attempt plus one retry per request.
    svc = await createService(testConfig(liveEnv(upstream, dataDir, { INGEST_TIMEOUT_MS: '400', INGEST_RETRIES: '1' })), {
      clock: () => new Date(now),
      // The test runs the rounds (ingest.once); a scheduled one could overlap them.
      ingestSchedule: false,
    });
  });
  after(async () => {
    await svc?.stop();
    await upstream?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const get = async (url: string) => {
    const r = await svc.app.inject({
      method: 'GET',
      url,
      remoteAddress: `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`,
    });
    return { status: r.statusCode, body: r.json() };
  };

  for (const fault of [{ kind: 'hang' }, { kind: 'garbage' }, { kind: 'destroy' }] as Fault[]) {
    test(`every upstream ${fault.kind === 'destroy' ? 'dropping the connection mid-body' : fault.kind === 'hang' ? 'hanging' : 'answering garbage'}: last good data served, marked stale; recovery without a restart`, async () => {
      const before = svc.market.asOf;
      // Three days later, with every upstream faulty.
      now = at(addDays(before, 3)) + 3_600_000;
      upstream.setToday(addDays(before, 3));
      for (const u of UPSTREAM_NAMES) upstream.fault(u, fault);
      const t0 = performance.now();
      const round = await svc.ingest!.once();
      const ms = performance.now() - t0;
      assert.ok(round.leader);
      assert.equal(round.recomputed, false, 'nothing stored');
      assert.ok(
        round.outcomes.every((o) => o.error && o.inserted === 0),
        JSON.stringify(round.outcomes.filter((o) => !o.error)),
      );
      // Bounded: a hanging upstream costs each request its timeout and one retry, not forever.
      assert.ok(ms < 60_000, `round took ${Math.round(ms)} ms`);
      assert.equal(svc.market.asOf, before, 'the last good day is still served');

      const regime = await get('/api/v1/regime');
      assert.equal(regime.status, 200);
      assert.equal(regime.body.data.as_of, before);
      assert.equal(regime.body.data.stale, true);
      assert.match(regime.body.data.stale_reason, new RegExp(`BTC \\(prices\\) end ${before}, 2 days before`));
      const signals = await get('/api/v1/signals');
      assert.equal(signals.status, 200);
      assert.equal(signals.body.data.signals.length, 0, 'no asset is served as current on stale prices');
      const btc = signals.body.data.unavailable.find((u: { asset: string }) => u.asset === 'bitcoin');
      assert.match(btc.reason, /^stale: /);
      assert.equal(btc.newest_date, before);
      const one = await get('/api/v1/signals/bitcoin');
      assert.equal(one.status, 404);
      assert.match(one.body.error.message, /has no current signal: stale: BTC \(prices\) end/);
      const status = (await get('/api/v1/status')).body.data;
      const candles = status.series.find((s: { series: string }) => s.series === 'candles:bitcoin');
      assert.equal(candles.stale, true);
      assert.ok(candles.last_error, 'the failure is recorded');
      assert.match(candles.last_error_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'ISO 8601, as every timestamp of the API');
      assert.equal(candles.newest_date, before);

      // The upstreams return: the next round catches up on every missed day.
      for (const u of UPSTREAM_NAMES) upstream.fault(u, null);
      const recovered = await svc.ingest!.once();
      assert.equal(recovered.recomputed, true);
      assert.equal(svc.market.asOf, addDays(before, 2));
      const after = await get('/api/v1/signals/bitcoin');
      assert.equal(after.status, 200);
      assert.equal(after.body.data.as_of, addDays(before, 2));
      assert.equal(after.body.data.stale, false);
      // Live answers may change at any round: shared caches keep them 5 minutes, not until midnight.
      const cached = await svc.app.inject({ method: 'GET', url: '/api/v1/regime', remoteAddress: '10.8.0.1' });
      assert.equal(cached.headers['cache-control'], 'public, max-age=300');
      const st = (await get('/api/v1/status')).body.data.series.find((s: { series: string }) => s.series === 'candles:bitcoin');
      assert.equal(st.last_error, null);
      assert.equal(st.stale, false);
    });
  }
});
