/**
 * The backtest driver (src/services/backtest.ts) on the bundled data: point-in-time (cutting
 * the data after day D changes no result up to D), the served parameters are the walk-forward
 * rule's choice, and bad options are clear errors.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { CURRENT_LIVE_FROM, CURRENT_MODEL, MODEL_V4 } from '../../src/engine/signal.ts';
import { addDays } from '../../src/engine/util.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { chooseBands, runBacktest, trackRecord } from '../../src/services/backtest.ts';
import { targets } from '../../src/services/backtest-format.ts';
import { MarketService } from '../../src/services/market.ts';
import { trackRecordOffThread } from '../../src/services/track-record-thread.ts';
import { ServiceError } from '../../src/errors.ts';
import type { MarketData } from '../../src/providers/port.ts';

const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** Copies data/ and deletes every row dated after `day` from every time series. */
function truncatedDataset(day: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'mi-bt-'));
  tmp.push(dir);
  cpSync(path.join(ROOT_DIR, 'data'), dir, { recursive: true });
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = path.join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else if (n.endsWith('.csv')) {
        const [head, ...rows] = readFileSync(p, 'utf8').trimEnd().split('\n');
        writeFileSync(p, [head, ...rows.filter((r) => r.slice(0, 10) <= day)].join('\n') + '\n');
      }
    }
  };
  walk(dir);
  return dir;
}

const plain = (x: unknown) => JSON.parse(JSON.stringify(x));
let full: MarketService;
before(async () => {
  full = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), null);
});

describe('backtest driver', () => {
  test('point-in-time: cutting the data after day D changes no result up to D (fixed and walk-forward)', async () => {
    const D = '2023-06-30';
    const cut = await MarketService.create(new DatasetProvider(truncatedDataset(D)), null);
    assert.equal(cut.asOf, D);
    // Every 30-day forward return of the window is known by D.
    const to = addDays(D, -30);
    for (const opts of [
      { from: '2020-01-01', to, walkForward: true },
      { from: '2020-01-01', to },
      { from: '2021-03-01', to, model: 'signals-v1' },
    ]) {
      const a = runBacktest(full, opts);
      const b = runBacktest(cut, opts);
      assert.ok(a.pooled.days > 700 && a.assets.length >= 9, 'the comparison is about something');
      assert.deepEqual(plain(b), plain(a), JSON.stringify(opts));
    }
    // And the daily series themselves agree up to D.
    for (const [asset, s] of cut.seriesFor(CURRENT_MODEL)) {
      const f = full.seriesFor(CURRENT_MODEL).get(asset)!;
      assert.deepEqual(
        s.map((x) => [x.as_of, x.signal, x.score, x.confidence]),
        f.filter((x) => x.as_of <= D).map((x) => [x.as_of, x.signal, x.score, x.confidence]),
        asset,
      );
    }
  });

  test('walk-forward: each year is scored with bands chosen on data that ends before it', () => {
    const r = runBacktest(full, { from: '2020-01-01', walkForward: true });
    assert.equal(r.mode, 'walk_forward');
    assert.equal(r.bands, null);
    for (const c of r.choices) {
      assert.equal(c.trained_through, addDays(`${c.year}-01-01`, -31));
      const best = Math.max(...c.candidates.map((x) => x.objective ?? -Infinity));
      assert.deepEqual(c.candidates.find((x) => x.objective === best)!.bands, c.bands);
    }
    // The concatenation: the last year's asset-days carry the levels of the model with that year's bands.
    const y = r.choices.at(-1)!;
    const alone = runBacktest(full, { from: `${y.year}-01-01`, walkForward: true });
    assert.deepEqual(alone.choices, [y]);
    assert.equal(alone.pooled.level_changes <= r.pooled.level_changes, true);
  });

  test('the served model v4 uses the bands the walk-forward rule picks on all data before it went live', () => {
    assert.equal(CURRENT_MODEL, MODEL_V4);
    const c = chooseBands(full, 2025, 10, CURRENT_LIVE_FROM);
    assert.equal(c.trained_through, '2025-08-31');
    assert.deepEqual(c.bands, MODEL_V4.bands);
  });

  test("walk-forward, out of sample: v4 and v3 meet issue #10's eight targets; v2 misses drawdown and buy edge", () => {
    const v4 = runBacktest(full, { from: '2020-01-01', to: '2025-09-30', walkForward: true });
    const v3 = runBacktest(full, { from: '2020-01-01', to: '2025-09-30', walkForward: true, model: 'signals-v3' });
    const v2 = runBacktest(full, { from: '2020-01-01', to: '2025-09-30', walkForward: true, model: 'signals-v2' });
    assert.equal(v4.model_version, 'signals-v4');
    assert.equal(v3.model_version, 'signals-v3');
    assert.equal(v2.model_version, 'signals-v2');
    for (const r of [v4, v3])
      assert.deepEqual(
        targets(r).filter((t) => !t.met),
        [],
        r.model_version,
      );
    // v4 differs from v3 only on the first days of the assets that start in the window: HYPE's
    // unconfirmed first-day strong_buy is gone.
    const hype = (r: typeof v4) => r.assets.find((a) => a.asset === 'hyperliquid')!;
    assert.ok(hype(v4).long_flat.total_return < hype(v3).long_flat.total_return);
    const early = (r: typeof v4) => r.assets.filter((a) => a.from === '2020-01-01').map((a) => [a.asset, a.long_flat]);
    assert.equal(early(v4).length, 8);
    assert.deepEqual(early(v4), early(v3));
    assert.deepEqual(
      targets(v2)
        .filter((t) => !t.met)
        .map((t) => t.value),
      ['5 of 11', '-0.3'],
    );
  });

  test('bad options are RangeErrors that say what is wrong', () => {
    assert.throws(() => runBacktest(full, { from: '2020-13-01' }), /--from must be a calendar day/);
    assert.throws(() => runBacktest(full, { from: '2021-01-01', to: '2020-01-01' }), /is after --to/);
    assert.throws(() => runBacktest(full, { from: '2021-01-01', costBps: -1 }), /--cost-bps/);
    assert.throws(() => runBacktest(full, { from: '2021-01-01', model: 'signals-v9' }), /unknown model 'signals-v9'/);
    assert.throws(
      () => runBacktest(full, { from: '2021-01-01', walkForward: true, model: 'signals-v1' }),
      /evaluates signals-v2, signals-v3, signals-v4 only/,
    );
  });

  test('v1 and v2 differ where the issue asked: v2 reaches strong_sell, changes level less often', () => {
    const v1 = runBacktest(full, { from: '2020-01-01', model: 'signals-v1' });
    const v2 = runBacktest(full, { from: '2020-01-01', model: 'signals-v2' });
    assert.equal(v1.pooled.levels.strong_sell, 0);
    assert.ok(v2.pooled.levels.strong_sell > 0);
    assert.ok(v2.pooled.level_changes < v1.pooled.level_changes / 3);
  });
});

describe('the track record served by MarketService (GET /api/v1/track-record)', () => {
  let market: MarketService;
  before(async () => {
    market = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), null);
  });

  test('is computed in a worker thread: the event loop keeps turning, the figures are those of trackRecord', async () => {
    // Timers keep firing while the worker computes (on the main thread, the 2-3 s of CPU held
    // every request of the service that long).
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const [first, shared] = await Promise.all([market.trackRecord(), market.trackRecord()]);
    clearInterval(timer);
    assert.ok(ticks >= 10, `the event loop turned only ${ticks} times while the track record was computed`);
    assert.equal(first.cached, false);
    assert.equal(shared.cached, true, 'a concurrent first request shares the one computation');
    assert.equal(first.json, shared.json);
    assert.deepEqual(JSON.parse(first.json), JSON.parse(JSON.stringify(trackRecord(market))), 'the same figures as on the calling thread');
    const again = await market.trackRecord();
    assert.equal(again.cached, true, 'then served from the memo');
    assert.equal(again.json, first.json);
    assert.equal(await market.trackRecord(), again, 'one answer object for every later request (edges memoize on it, e.g. the ETag)');
  });

  test('a reload computes it again; a failed or late worker is SERVICE_UNAVAILABLE and memoizes nothing', async () => {
    const before = await market.trackRecord();
    market.reload(market.data);
    const recomputed = await market.trackRecord();
    assert.equal(recomputed.cached, false, 'a reload drops the memo');
    assert.equal(recomputed.json, before.json, 'same data, same figures');

    await assert.rejects(trackRecordOffThread({} as MarketData), (e: unknown) => {
      assert.ok(e instanceof ServiceError && e.code === 'SERVICE_UNAVAILABLE', String(e));
      assert.match(e.message, /could not be computed .*try again in a minute/);
      assert.deepEqual(e.details, { retry_after: 60 }, 'the wait the message names, for Retry-After');
      return true;
    });
    await assert.rejects(trackRecordOffThread(market.data, 1), /no result within 0\.001 s/);

    // Through MarketService: a computation that times out answers SERVICE_UNAVAILABLE, and the
    // next request computes again instead of finding the failure memoized.
    const options = { trackRecordTimeoutMs: 1 };
    const late = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), null, undefined, options);
    await assert.rejects(late.trackRecord(), (e: unknown) => e instanceof ServiceError && e.code === 'SERVICE_UNAVAILABLE');
    options.trackRecordTimeoutMs = 60_000;
    const retried = await late.trackRecord();
    assert.equal(retried.cached, false, 'computed again after the failure');
    assert.equal(retried.json, before.json);
  });
});
