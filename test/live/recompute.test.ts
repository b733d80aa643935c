import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { createCore, prepareCore } from '../../src/core.ts';
import { addDays } from '../../src/engine/util.ts';
import { ingestRound, type IngestDeps } from '../../src/jobs/ingest.ts';
import { createLiveSources } from '../../src/providers/live/index.ts';
import { StoredMarketProvider } from '../../src/services/market-data.ts';
import { HistoryRepo } from '../../src/store/history-repo.ts';
import { MarketRepo } from '../../src/store/market-repo.ts';
import { testConfig } from '../helpers/env.ts';
import { cutDataset, liveEnv } from '../helpers/live.ts';
import { startUpstream } from '../helpers/upstream.ts';

// Rows stored by a round whose recompute then failed (the database went away while reloading)
// are not forgotten: the next round, though it fetches nothing new, recomputes and serves them.

test('a failed recompute after a successful write is retried by the next round', async () => {
  const CUT = '2025-04-10';
  const today = addDays(CUT, 3);
  const upstream = await startUpstream();
  upstream.setToday(today);
  const dir = cutDataset(CUT);
  const core = await createCore(testConfig(liveEnv(upstream, dir)));
  try {
    await prepareCore(core);
    const stored = new StoredMarketProvider(new MarketRepo(core.database.jobs));
    let failNext = true;
    const deps: IngestDeps = {
      sources: createLiveSources({ baseUrls: upstream.baseUrls, timeoutMs: 2000, retries: 1, hostBudgetPerMinute: 6000 }),
      repo: new MarketRepo(core.database.jobs),
      history: new HistoryRepo(core.database.jobs),
      market: core.market,
      provider: {
        name: 'flaky',
        load: async (asOf?: string) => {
          if (failNext) {
            failNext = false;
            throw new Error('connection terminated unexpectedly');
          }
          return stored.load(asOf);
        },
      },
      coordination: core.database.coordination,
      log: core.log,
      startAfter: CUT,
      today: () => today,
      fetchTimeoutMs: 30_000,
    };
    await assert.rejects(ingestRound(deps), /connection terminated/);
    assert.equal(core.market.asOf, CUT, 'the failed recompute left the served state as it was');
    const again = await ingestRound(deps);
    assert.equal(
      again.outcomes.reduce((s, o) => s + o.inserted, 0),
      0,
      'nothing new to fetch',
    );
    assert.equal(again.recomputed, true, 'but the pending rows were recomputed');
    assert.equal(core.market.asOf, addDays(CUT, 2));
    assert.equal(
      (await new HistoryRepo(core.database.jobs).backfillState('bitcoin'))?.throughDate,
      addDays(CUT, 2),
      'history covers the new days',
    );
  } finally {
    await core.stop();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
