import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createService, type Service } from '../../src/server.ts';
import { testConfig } from '../helpers/env.ts';
import { cutDataset } from '../helpers/live.ts';

// Offline, on a dataset where one asset's prices end months before the others' (issue #9):
// that asset is listed as unavailable with the reason, never served as if its last day were
// today's; the others are served with their freshness.

let svc: Service;
let dir = '';

before(async () => {
  dir = cutDataset('2025-09-30');
  const file = path.join(dir, 'prices', 'ada.csv');
  const [header, ...rows] = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  writeFileSync(file, [header, ...rows.filter((r) => r.slice(0, 10) <= '2025-06-01')].join('\n') + '\n');
  svc = await createService(testConfig({ DATA_DIR: dir }));
});
after(async () => {
  await svc?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('an asset whose prices ended early is unavailable, with why; the rest carry stale flags', async () => {
  const r = await svc.app.inject({ method: 'GET', url: '/api/v1/signals', remoteAddress: '10.7.0.1' });
  assert.equal(r.statusCode, 200);
  const data = r.json().data;
  assert.equal(r.json().meta.as_of, '2025-09-30');
  assert.deepEqual(data.unavailable, [
    {
      asset: 'cardano',
      reason: 'stale: ADA (prices) end 2025-06-01, 121 days before 2025-09-30 (expected every 24 h); not served as current',
      newest_date: '2025-06-01',
    },
  ]);
  assert.equal(data.signals.length, 10);
  const btc = data.signals.find((s: { asset: string }) => s.asset === 'bitcoin');
  assert.deepEqual([btc.stale, btc.stale_reason], [false, null]);
  // Ethereum's TVL in the bundled data ends on 2025-08-02: its signal says so.
  const eth = data.signals.find((s: { asset: string }) => s.asset === 'ethereum');
  assert.equal(eth.stale, true);
  assert.match(eth.stale_reason, /eth tvl \(chain metric\) end 2025-08-02, 59 days before 2025-09-30/);

  const one = await svc.app.inject({ method: 'GET', url: '/api/v1/signals/ada', remoteAddress: '10.7.0.2' });
  assert.equal(one.statusCode, 404);
  assert.equal(one.json().error.code, 'NOT_FOUND');
  assert.match(one.json().error.message, /Asset 'ada' has no current signal: stale: ADA \(prices\) end 2025-06-01.*GET \/api\/v1\/status/);
  assert.equal(one.json().error.details.newest_date, '2025-06-01');

  const status = await svc.app.inject({ method: 'GET', url: '/api/v1/status', remoteAddress: '10.7.0.3' });
  const ada = status.json().data.series.find((s: { series: string }) => s.series === 'candles:cardano');
  assert.deepEqual([ada.newest_date, ada.stale, ada.origin], ['2025-06-01', true, 'bundled']);
  // Series with no data at all are counted apart: gaps, neither fresh nor stale.
  const series = status.json().data.series as { series: string; newest_date: string | null; stale: boolean }[];
  const empty = series.filter((s) => s.newest_date === null);
  assert.ok(
    empty.some((s) => s.series === 'metric:eth:dex_volume'),
    'the bundled ETH DEX volume column is empty',
  );
  assert.equal(status.json().data.empty_series, empty.length);
  assert.equal(status.json().data.stale_series, series.filter((s) => s.stale).length);
  // A documented gap is named in both modes; offline nothing is fetched, so its stale reason stays the age alone.
  const gas = status.json().data.series.find((s: { series: string }) => s.series === 'metric:eth:gas_used');
  assert.match(gas.no_live_source, /Etherscan daily gas used needs an API key/);
  assert.doesNotMatch(String(gas.stale_reason), /no live source/);
  const again = await svc.app.inject({ method: 'GET', url: '/api/v1/status', remoteAddress: '10.7.0.3' });
  assert.equal(again.headers['x-ratelimit-remaining'], status.headers['x-ratelimit-remaining'], '/status counts against no quota');
});
