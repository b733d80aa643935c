import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { CURRENT_MODEL } from '../../src/engine/signal.ts';
import { addDays } from '../../src/engine/util.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { createLiveSources } from '../../src/providers/live/index.ts';
import type { MarketData, MarketDataProvider } from '../../src/providers/port.ts';
import { MarketService } from '../../src/services/market.ts';
import { createService, type Service } from '../../src/server.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';
import { at, cutDataset, liveEnv } from '../helpers/live.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

// The live path equals the batch path (issue #9): a service started in live mode on the
// bundled data cut at CUT ingests the following days from a local upstream serving the
// bundled data in each source's wire format; what it serves and stores for each day equals
// what the offline service computes from the bundled data as of that day. Two instances share
// PostgreSQL: exactly one ingests, both serve the new day.

/** Last day of the data the services start with, and the last day ingested. */
const CUT = '2025-04-10';
const END = '2025-04-14';
const SIX_HOURS = 6 * 3_600_000;

/** A deep copy without provenance strings (`source`), which name the live API instead of the file. */
function withoutSources(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutSources);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => k !== 'source')
        .map(([k, x]) => [k, withoutSources(x)]),
    );
  return v;
}

/**
 * The batch path's data: the bundled dataset as of `asOf`, except that the chain metrics no
 * free live source provides (documented gaps, e.g. Ethereum gas used) end at CUT, as they do
 * in live mode.
 */
function batchProvider(bundled: DatasetProvider): MarketDataProvider {
  const live = new Set(createLiveSources().map((s) => s.series));
  return {
    name: 'batch',
    async load(asOf?: string): Promise<MarketData> {
      const data = await bundled.load(asOf);
      for (const [chain, rec] of data.chains)
        for (const [metric, s] of Object.entries(rec))
          if (!live.has(`metric:${chain}:${metric}`)) rec[metric] = { ...s, points: s.points.filter((p) => p.date <= CUT) };
      return data;
    },
  };
}

describe('live ingest replay on PostgreSQL with two instances', () => {
  let skip: string | null = null;
  let upstream: Upstream;
  let dataDir = '';
  let drop: (() => Promise<void>) | undefined;
  let a: Service;
  let b: Service;
  let now = at(addDays(CUT, 1));
  const clock = () => new Date(now);
  const bundled = new DatasetProvider(path.join(ROOT_DIR, 'data'));

  before(async () => {
    if (!(await postgresAvailable())) {
      skip = PG_SKIP;
      return;
    }
    upstream = await startUpstream();
    upstream.setToday(addDays(CUT, 1));
    dataDir = cutDataset(CUT);
    const tmp = await createTempPgDatabase();
    drop = tmp.drop;
    const cfg = testConfig(liveEnv(upstream, dataDir, { DATABASE_URL: tmp.url, AUTH_SECRET: 'replay-test-secret-0123456789abcdef0123' }));
    [a, b] = await Promise.all([createService(cfg, { clock }), createService(cfg, { clock })]);
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    await upstream?.close();
    await drop?.();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test(
    'exactly one instance ingests; both serve each new day; answers and history equal the batch path',
    { timeout: 600_000 },
    async (t) => {
      if (skip) return t.skip(skip);
      assert.equal(a.market.asOf, CUT);
      const leaders = new Set<string>();
      // Rounds every 6 hours of the test clock (the Solana source samples between rounds).
      for (now = at(addDays(CUT, 1)); now <= at(addDays(END, 1)); now += SIX_HOURS) {
        const day = new Date(now).toISOString().slice(0, 10);
        upstream.setToday(day);
        upstream.setNow(now);
        const rounds = await Promise.all([a.ingest!.once(), b.ingest!.once()]);
        const led = rounds.map((r, i) => (r.leader ? ['a', 'b'][i]! : null)).filter((x): x is string => x !== null);
        assert.equal(led.length, 1, `exactly one leader at ${new Date(now).toISOString()}`);
        leaders.add(led[0]!);
        const round = rounds.find((r) => r.leader)!;
        assert.deepEqual(
          round.outcomes.filter((o) => o.error),
          [],
          'no series failed',
        );
        if (now % 86_400_000 !== 0) continue;
        const served = addDays(day, -1);
        // The follower reloads on the leader's NOTIFY.
        for (let i = 0; i < 100 && (a.market.asOf !== served || b.market.asOf !== served); i++)
          await new Promise((r) => setTimeout(r, 100));
        assert.equal(a.market.asOf, served, 'a serves the new day');
        assert.equal(b.market.asOf, served, 'b serves the new day');
        for (const svc of [a, b]) {
          const res = await svc.app.inject({ method: 'GET', url: '/api/v1/signals/bitcoin' });
          assert.equal(res.statusCode, 200, res.body);
          assert.equal(res.json().meta.as_of, served);
        }

        const batch = await MarketService.create(batchProvider(bundled), null, served);
        for (const svc of [a, b]) {
          assert.deepEqual(
            withoutSources(svc.market.signals(true).value),
            withoutSources(batch.signals(true).value),
            `signals on ${served}`,
          );
          assert.deepEqual(withoutSources(svc.market.regime().value), withoutSources(batch.regime().value), `regime on ${served}`);
          assert.deepEqual(
            withoutSources(svc.market.chainHealth().value),
            withoutSources(batch.chainHealth().value),
            `chain health on ${served}`,
          );
        }
        for (const asset of bundled ? (await bundled.load(served)).assets.map((x) => x.asset) : []) {
          const stored = (await a.repos.history.listChanges(asset, '2000-01-01', served, 100_000, CURRENT_MODEL.version)).reverse();
          assert.deepEqual(
            withoutSources(stored),
            withoutSources(batch.changes(asset).map((c) => ({ ...c, model_version: CURRENT_MODEL.version }))),
            `stored history of ${asset} through ${served}`,
          );
        }
      }
      assert.equal(leaders.size, 1, 'the same instance led every round');
      const status = (await b.app.inject({ method: 'GET', url: '/api/v1/status' })).json().data;
      assert.equal(status.mode, 'live');
      assert.equal(status.as_of, END);
      const btc = status.series.find((s: { series: string }) => s.series === 'candles:bitcoin');
      assert.equal(btc.origin, 'live');
      assert.equal(btc.newest_date, END);
      assert.match(btc.last_success_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'last successful fetch recorded, ISO 8601');
    },
  );
});
