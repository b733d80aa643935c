import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { CHAIN_STALENESS_DAYS } from '../../src/engine/chain-health.ts';
import { addDays } from '../../src/engine/util.ts';
import { createService, type Service } from '../../src/server.ts';
import { testConfig } from '../helpers/env.ts';
import { at, cutDataset, liveEnv } from '../helpers/live.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

// Live mode whose sources stopped (no ingest round stores anything): chain health is judged at
// the reference day (yesterday by the clock), not at the data's last day, so metrics more than
// CHAIN_STALENESS_DAYS old count as missing and an old score does not pass for current health
// (docs/methodology.md, "Chain health"). Before that limit the last score is served, marked stale.

const CUT = '2025-04-10';
let upstream: Upstream;
let svc: Service;
let dataDir = '';
let now = at(addDays(CUT, 2)) + 3_600_000;

before(async () => {
  upstream = await startUpstream();
  dataDir = cutDataset(CUT);
  // No ingest schedule: nothing is stored while the test runs (the upstream would serve later days).
  svc = await createService(testConfig(liveEnv(upstream, dataDir)), { clock: () => new Date(now), ingestSchedule: false });
});
after(async () => {
  await svc?.stop();
  await upstream?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const get = async (url: string) => {
  const r = await svc.app.inject({ method: 'GET', url, remoteAddress: `10.11.${Math.floor(Math.random() * 250)}.1` });
  return { status: r.statusCode, body: r.json() };
};

test('chain health in live mode: served stale within the staleness limit, insufficient_data past it', async () => {
  assert.equal(svc.market.asOf, CUT);
  // The reference day is the day after the last data (evaluated there, nothing is old yet):
  // the same health as the series' last result.
  const fresh = (await get('/api/v1/chain-health/sol')).body.data;
  const last = svc.market.chainHealthSeries.get('sol')!.at(-1)!;
  assert.equal(fresh.score, last.score);
  assert.equal(typeof fresh.score, 'number');
  const before = (await svc.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.match(before, /^signals_unavailable 0$/m);
  const pricesFresh = (await get('/api/v1/prices/sol?days=5')).body.data;
  assert.deepEqual([pricesFresh.stale, pricesFresh.stale_reason], [false, null]);

  // Ten days on, nothing new stored: the metrics are stale but within the 14-day limit, so
  // the last score is served, marked stale.
  now = at(addDays(CUT, 10)) + 3_600_000;
  const within = (await get('/api/v1/chain-health/sol')).body.data;
  assert.equal(within.score, last.score);
  assert.equal(within.stale, true);
  assert.match(within.stale_reason, /sol .* \(chain metric\) end/);

  // The clock moves on past the limit: the metrics age out against the reference day.
  now = at(addDays(CUT, CHAIN_STALENESS_DAYS + 10)) + 3_600_000;
  const old = await get('/api/v1/chain-health/sol');
  assert.equal(old.status, 200);
  assert.equal(old.body.data.score, null);
  assert.equal(old.body.data.status, 'insufficient_data');
  assert.equal(old.body.data.stale, true);
  assert.ok(old.body.data.missing_metrics.length > 0);
  for (const m of old.body.data.missing_metrics)
    assert.match(m.reason, m.last_date ? /^stale: newest value is \d+ days old \(limit 14\)$/ : /./, m.metric);
  const all = (await get('/api/v1/chain-health')).body.data.chains;
  assert.ok(all.every((c: { score: number | null }) => c.score === null));
  // Monitoring sees it: every series with data is stale and no signal is served as current.
  const metrics$ = (await svc.app.inject({ method: 'GET', url: '/metrics' })).body;
  const gauge = (re: RegExp) => Number(re.exec(metrics$)?.[1]);
  const status = (await get('/api/v1/status')).body.data;
  assert.equal(gauge(/^market_series\{state="stale"\} (\d+)$/m), status.stale_series);
  assert.equal(gauge(/^market_series\{state="empty"\} (\d+)$/m), status.empty_series);
  assert.equal(gauge(/^market_series\{state="fresh"\} (\d+)$/m), 0);
  assert.equal(gauge(/^signals_unavailable (\d+)$/m), 11);
  // The two documented gaps say that no live source will bring them up to date; the others have one.
  type SeriesRow = { series: string; no_live_source: string | null; stale_reason: string | null };
  const rows = status.series as SeriesRow[];
  const gaps = rows.filter((r) => r.no_live_source !== null).map((r) => r.series);
  assert.deepEqual(gaps.sort(), ['metric:eth:fees_usd_etherscan_derived', 'metric:eth:gas_used']);
  const gas = rows.find((r) => r.series === 'metric:eth:gas_used')!;
  assert.match(gas.no_live_source!, /needs an API key/);
  assert.match(gas.stale_reason!, /; no live source fetches it \(see no_live_source\)$/);
  const sol = rows.find((r) => r.series === 'candles:solana')!;
  assert.equal(sol.no_live_source, null);
  assert.doesNotMatch(sol.stale_reason!, /no live source/);
  // GET /assets: no signal is current, the stored history still is served (and says so).
  const assets = (await get('/api/v1/assets')).body.data.assets as { asset: string; capabilities: Record<string, boolean> }[];
  assert.ok(assets.every((a) => !a.capabilities.signals && !a.capabilities.thesis));
  assert.ok(
    assets.every((a) => a.capabilities.signal_history),
    'history is stored for every asset',
  );
  assert.equal((await svc.market.signalHistory('sol', 365, 5)).value.entries.length > 0, true);
  // A thesis on an asset with no current signal exists, but its health cannot be told now:
  // 503 (not the 404 of a missing thesis); the list says so per thesis.
  const t = await svc.theses.create('stale-user', 'stale@example.com', { asset: 'SOL', direction: 'long', title: 'SOL', conditions: [] });
  await assert.rejects(
    svc.theses.health('stale-user', t.id),
    (e: Error & { code?: string }) =>
      e.code === 'SERVICE_UNAVAILABLE' &&
      e.message.startsWith(`Thesis '${t.id}' cannot be evaluated now: Asset 'solana' has no current signal: stale`),
  );
  const listed = (await svc.theses.list('stale-user', { withHealth: true, limit: 10 })).theses[0]!;
  assert.equal(listed.health, null);
  assert.equal(listed.health_error?.code, 'SERVICE_UNAVAILABLE');
  // Prices are served as stored, and say how old they are.
  const prices = (await get('/api/v1/prices/sol?days=5')).body.data;
  assert.equal(prices.stale, true);
  assert.match(prices.stale_reason, new RegExp(`^SOL \\(prices\\) end ${CUT}, \\d+ days before`));
  // The raw metrics are still served as stored, with their age.
  const metrics = await get('/api/v1/chain-metrics/sol');
  assert.equal(metrics.status, 200);
  assert.equal(metrics.body.data.stale, true);
});
