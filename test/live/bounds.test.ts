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

// A series whose fetch is ended by its time bound (here: an upstream answering 429 with a
// Retry-After the retries cannot wait out within the bound) fails within the bound, and its
// error says what ran out and what the upstream last answered, not a bare 'aborted' (which is
// also what a stopping service reports).

test("a series ended by its time bound says so, with the upstream's last answer", async () => {
  const CUT = '2025-04-10';
  const today = addDays(CUT, 3);
  const upstream = await startUpstream();
  upstream.setToday(today);
  const dir = cutDataset(CUT);
  const core = await createCore(testConfig(liveEnv(upstream, dir)));
  try {
    await prepareCore(core);
    upstream.fault('binance', { kind: 'status', status: 429, retryAfter: '5' });
    const repo = new MarketRepo(core.database.jobs);
    const deps: IngestDeps = {
      sources: createLiveSources({ baseUrls: upstream.baseUrls, timeoutMs: 2000, retries: 2, hostBudgetPerMinute: 6000 }),
      repo,
      history: new HistoryRepo(core.database.jobs),
      market: core.market,
      provider: new StoredMarketProvider(new MarketRepo(core.database.jobs)),
      coordination: core.database.coordination,
      log: core.log,
      startAfter: CUT,
      today: () => today,
      fetchTimeoutMs: 1500,
    };
    const t0 = performance.now();
    const round = await ingestRound(deps);
    assert.ok(performance.now() - t0 < 4500, `bounded by the series' time bound: ${Math.round(performance.now() - t0)} ms`);
    const btc = round.outcomes.find((o) => o.series === 'candles:bitcoin')!;
    assert.equal(btc.inserted, 0);
    assert.match(
      btc.error ?? '',
      /^UpstreamError: Binance spot \/api\/v3\/klines BTCUSDT 1d: \/api\/v3\/klines: aborted: no result within the series' time bound of 1500 ms \(last attempt: HTTP 429, Retry-After 5 s\)$/,
    );
    const state = (await repo.seriesStates()).find((s) => s.series === 'candles:bitcoin')!;
    assert.equal(state.lastError, btc.error, 'the same text in last_error (GET /status)');
    assert.equal(state.newestDate, CUT, 'nothing written');
    const fng = round.outcomes.find((o) => o.series === 'fear_greed')!;
    assert.equal(fng.error, undefined, 'the other hosts were not held up');
    assert.ok(fng.inserted > 0);

    // A round cut short by the service stopping reports why in its outcomes and the log, but
    // records no last_error: the upstream did not fail.
    upstream.fault('alternativeMe', { kind: 'hang' });
    const stopping = new AbortController();
    setTimeout(() => stopping.abort(new Error('the service is stopping')), 300);
    const stopped = await ingestRound({ ...deps, stopSignal: stopping.signal });
    const fg = stopped.outcomes.find((o) => o.series === 'fear_greed')!;
    assert.match(fg.error ?? '', /\/fng\/: aborted: the service is stopping$/);
    const after = new Map((await repo.seriesStates()).map((s) => [s.series, s]));
    assert.equal(after.get('fear_greed')!.lastError, null, 'no last_error for a stop');
    assert.equal(after.get('candles:bitcoin')!.lastError, btc.error, 'the real failure before it is kept, not replaced by the stop');
  } finally {
    await core.stop();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
