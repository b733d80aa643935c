/**
 * GET /chain-health is adjusted for the BTC regime (docs/methodology.md, "Chain health"): the
 * regime in force at the day is the newest one dated on or before it, computed from BTC's
 * candles. When those stop while the chain's own metrics go on, the answer must say that the
 * regime it is adjusted for is old, as it says for each old metric.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import type { MarketDataProvider } from '../../src/providers/port.ts';
import { MarketService } from '../../src/services/market.ts';

const DAY = '2024-03-01'; // every ETH metric is fresh here
const BTC_END = '2024-02-20';
let full: MarketService;
let cutBtc: MarketService;

before(async () => {
  const dataset = new DatasetProvider(path.join(ROOT_DIR, 'data'));
  full = await MarketService.create(dataset, null, DAY);
  const btcStops: MarketDataProvider = {
    name: 'btc-stops',
    load: async (asOf) => {
      const data = await dataset.load(asOf);
      data.candles.set(
        'bitcoin',
        data.candles.get('bitcoin')!.filter((c) => c.date <= BTC_END),
      );
      return data;
    },
  };
  cutBtc = await MarketService.create(btcStops, null, DAY);
});

test('chain health is fresh when its metrics and the regime are', () => {
  const eth = full.chainHealthOf('eth').value;
  assert.equal(eth.missing_metrics.length, 0);
  assert.deepEqual([eth.stale, eth.stale_reason], [false, null]);
});

test('chain health adjusted for a regime whose BTC prices stopped says so (stale, naming BTC)', () => {
  const eth = cutBtc.chainHealthOf('eth').value;
  // The same metrics, the regime of BTC's last day: the score is served, but marked.
  assert.equal(eth.as_of, DAY);
  assert.equal(eth.regime, cutBtc.regimeSeries.at(-1)!.regime);
  assert.equal(eth.stale, true);
  assert.match(eth.stale_reason ?? '', /BTC .*end 2024-02-20, 10 days before 2024-03-01/);
  for (const c of cutBtc.chainHealth().value.chains) assert.match(c.stale_reason ?? '', /BTC .*end 2024-02-20/, c.chain);
});
