import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addDays } from '../../src/engine/util.ts';
import { ingestRound } from '../../src/jobs/ingest.ts';
import { StoredMarketProvider } from '../../src/services/market-data.ts';
import { HistoryRepo } from '../../src/store/history-repo.ts';
import { MarketRepo } from '../../src/store/market-repo.ts';
import { withLiveCore } from '../helpers/live.ts';

// Rows stored by a round whose recompute then failed (the database went away while reloading)
// are not forgotten: the next round, though it fetches nothing new, recomputes and serves them.

test('a failed recompute after a successful write is retried by the next round', () =>
  withLiveCore(async (ctx) => {
    const stored = new StoredMarketProvider(new MarketRepo(ctx.core.database.jobs));
    let failNext = true;
    const deps = ctx.deps(1, {
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
    });
    await assert.rejects(ingestRound(deps), /connection terminated/);
    assert.equal(ctx.core.market.asOf, ctx.cut, 'the failed recompute left the served state as it was');
    const again = await ingestRound(deps);
    assert.equal(
      again.outcomes.reduce((s, o) => s + o.inserted, 0),
      0,
      'nothing new to fetch',
    );
    assert.equal(again.recomputed, true, 'but the pending rows were recomputed');
    assert.equal(ctx.core.market.asOf, addDays(ctx.cut, 2));
    assert.equal(
      (await new HistoryRepo(ctx.core.database.jobs).backfillState('bitcoin'))?.throughDate,
      addDays(ctx.cut, 2),
      'history covers the new days',
    );
  }));
