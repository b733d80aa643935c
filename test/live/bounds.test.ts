import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ingestRound } from '../../src/jobs/ingest.ts';
import { withLiveCore } from '../helpers/live.ts';

// A series whose fetch is ended by its time bound (here: an upstream answering 429 with a
// Retry-After the retry cannot wait out within the bound: the host's pause holds it back) fails
// within the bound, and its error says what ran out and what the upstream last answered, not a
// bare 'aborted' (which is also what a stopping service reports).

test("a series ended by its time bound says so, with the upstream's last answer", () =>
  withLiveCore(async (ctx) => {
    ctx.upstream.fault('binance', { kind: 'status', status: 429, retryAfter: '5' });
    const deps = ctx.deps(2, { fetchTimeoutMs: 1500 });
    const repo = deps.repo;
    const round = await ingestRound(deps);
    const btc = round.outcomes.find((o) => o.series === 'candles:bitcoin')!;
    // The series' own time (the round's also holds the other series' writes and the recompute,
    // seconds on a loaded machine); without the bound it would wait out the 5 s Retry-After.
    assert.ok(btc.ms < 4500, `bounded by the series' time bound: ${btc.ms} ms`);
    assert.equal(btc.inserted, 0);
    assert.match(
      btc.error ?? '',
      // Cut either in p-retry's randomized backoff or later, in the host's pause before the retry.
      /^UpstreamError: Binance spot \/api\/v3\/klines BTCUSDT 1d: \/api\/v3\/klines: (aborted: no result within the series' time bound of 1500 ms \(last attempt: HTTP 429, Retry-After 5 s\)|not sent: 127\.0\.0\.1:\d+ asked to wait until [\d-]+T[\d:.]+Z \(HTTP 429, Retry-After 5 s; aborted while waiting: no result within the series' time bound of 1500 ms\))$/,
    );
    const state = (await repo.seriesStates()).find((s) => s.series === 'candles:bitcoin')!;
    assert.equal(state.lastError, btc.error, 'the same text in last_error (GET /status)');
    assert.equal(state.newestDate, ctx.cut, 'nothing written');
    const fng = round.outcomes.find((o) => o.series === 'fear_greed')!;
    assert.equal(fng.error, undefined, 'the other hosts were not held up');
    assert.ok(fng.inserted > 0);

    // A round cut short by the service stopping reports why in its outcomes and the log, but
    // records no last_error: the upstream did not fail.
    ctx.upstream.fault('alternativeMe', { kind: 'hang' });
    const stopping = new AbortController();
    setTimeout(() => stopping.abort(new Error('the service is stopping')), 300);
    const stopped = await ingestRound({ ...deps, stopSignal: stopping.signal });
    const fg = stopped.outcomes.find((o) => o.series === 'fear_greed')!;
    assert.match(fg.error ?? '', /\/fng\/: aborted: the service is stopping$/);
    const after = new Map((await repo.seriesStates()).map((s) => [s.series, s]));
    assert.equal(after.get('fear_greed')!.lastError, null, 'no last_error for a stop');
    assert.equal(after.get('candles:bitcoin')!.lastError, btc.error, 'the real failure before it is kept, not replaced by the stop');
  }));
