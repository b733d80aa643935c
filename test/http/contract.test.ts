import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { createService, type Service } from '../../src/server.ts';
import { ErrorEnvelopeSchema, okEnvelope } from '../../src/http/envelope.ts';
import {
  AssetsDataSchema,
  ChainHealthListSchema,
  ChainHealthSchema,
  ChainMetricsSchema,
  HistoryDataSchema,
  RegimeDataSchema,
  SignalEntrySchema,
  SignalsDataSchema,
} from '../../src/services/schemas/market.ts';
import { readCsv, testConfig } from '../helpers/env.ts';

const PRICE_FILES: Record<string, string> = {
  bitcoin: 'btc', ethereum: 'eth', solana: 'sol', hyperliquid: 'hype', binancecoin: 'bnb', ripple: 'xrp',
  dogecoin: 'doge', cardano: 'ada', 'avalanche-2': 'avax', chainlink: 'link', litecoin: 'ltc',
};

let svc: Service;
let app: FastifyInstance;

let client = 0;
let proKey = '';
/**
 * GETs as a new unauthenticated client (its own IP) so the 5/minute unauthenticated limit
 * does not interfere; /signal-history (Pro or API tier) is called with a Pro key.
 */
async function get(url: string) {
  client++;
  const headers = url.includes('/signal-history/') ? { authorization: `Bearer ${proKey}` } : {};
  const res = await app.inject({ method: 'GET', url, headers, remoteAddress: `10.0.${client >> 8}.${client & 255}` });
  return { status: res.statusCode, headers: res.headers, body: res.json() as any, raw: res.body };
}

function expectError(r: { status: number; body: any }, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.body));
  ErrorEnvelopeSchema.parse(r.body);
  assert.equal(r.body.status, 'error');
  assert.equal(r.body.data, null);
  assert.equal(r.body.error.code, code);
  assert.equal(r.body.meta.version, 'v1');
}

before(async () => {
  svc = await createService(testConfig());
  app = svc.app;
  app.get('/api/v1/__boom', async () => {
    throw new Error('secret internal detail at /srv/db.ts:42');
  });
  await app.ready();
  proKey = (await svc.keys.create({ userId: 'contract-pro', email: 'contract-pro@example.com' }, 'contract')).key;
  await svc.keys.setTier('contract-pro@example.com', 'pro');
});
after(async () => svc?.stop());

describe('GET /api/v1/signals', () => {
  test('answers with all 11 assets, price_usd = dataset close on the as-of day', async () => {
    const r = await get('/api/v1/signals');
    assert.equal(r.status, 200);
    const env = okEnvelope(SignalsDataSchema).parse(r.body);
    assert.equal(env.meta.version, 'v1');
    assert.match(env.meta.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.equal(env.meta.as_of, '2025-09-30');
    assert.equal(env.data.signals.length, 11);
    assert.deepEqual(new Set(env.data.signals.map((s) => s.asset)), new Set(Object.keys(PRICE_FILES)));
    for (const s of env.data.signals) {
      const rows = readCsv(`prices/${PRICE_FILES[s.asset]}.csv`);
      const row = rows.find((x) => x.date === env.meta.as_of)!;
      assert.equal(s.price_usd, Number(row.close), s.asset);
      assert.equal(s.as_of, '2025-09-30');
      assert.equal(s.factors, undefined, 'factors only on request');
      const prev = rows.find((x) => x.date === '2025-09-29')!;
      assert.ok(Math.abs(s.change_24h_pct! - (Number(row.close) / Number(prev.close) - 1) * 100) < 1e-3);
    }
    assert.equal(r.headers['x-request-id'], env.meta.request_id);
  });

  test('include_factors=true adds factors whose contributions sum to the score', async () => {
    const r = await get('/api/v1/signals?include_factors=true');
    const env = okEnvelope(SignalsDataSchema).parse(r.body);
    for (const s of env.data.signals) {
      assert.ok(s.factors && s.factors.length > 0, s.asset);
      const sum = s.factors.reduce((a, f) => a + f.contribution, 0);
      assert.ok(Math.abs(sum - s.score) < 1e-6, `${s.asset}: ${sum} vs ${s.score}`);
      const names: string[] = s.factors.map((f): string => f.name).concat(s.missing_factors!.map((f) => f.name));
      for (const n of ['trend', 'momentum', 'rsi', 'fear_greed', 'funding_rate', 'regime']) assert.ok(names.includes(n), `${s.asset} ${n}`);
    }
    // Assets without funding history report the factor as missing instead of inventing it.
    const doge = env.data.signals.find((s) => s.asset === 'dogecoin')!;
    assert.ok(doge.missing_factors!.some((f) => f.name === 'funding_rate'));
    const btc = env.data.signals.find((s) => s.asset === 'bitcoin')!;
    assert.ok(btc.factors!.some((f) => f.name === 'funding_rate'));
  });

  test('include_factors=false is accepted, other values are 400 INVALID_PARAMETER', async () => {
    assert.equal((await get('/api/v1/signals?include_factors=false')).status, 200);
    for (const v of ['maybe', '1', 'TRUE', '']) {
      const r = await get(`/api/v1/signals?include_factors=${v}`);
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.match(r.body.error.message, /include_factors/);
    }
  });
});

describe('GET /api/v1/signals/{asset}', () => {
  test('resolves tickers and case, returns the canonical id', async () => {
    for (const q of ['bitcoin', 'BTC', 'btc', 'Bitcoin']) {
      const r = await get(`/api/v1/signals/${q}`);
      assert.equal(r.status, 200);
      const env = okEnvelope(SignalEntrySchema).parse(r.body);
      assert.equal(env.data.asset, 'bitcoin');
      assert.equal(env.data.symbol, 'BTC');
      assert.ok(['strong_buy', 'buy', 'neutral', 'sell', 'strong_sell'].includes(env.data.signal));
    }
    const h = okEnvelope(SignalEntrySchema).parse((await get('/api/v1/signals/HYPE?include_factors=true')).body);
    assert.equal(h.data.asset, 'hyperliquid');
    assert.ok(h.data.factors!.length > 0);
  });

  test('unknown asset is 404 NOT_FOUND naming the asset as given', async () => {
    const r = await get('/api/v1/signals/xyz');
    expectError(r, 404, 'NOT_FOUND');
    assert.equal(r.body.error.message, "Asset 'xyz' not found");
  });

  test('bad include_factors is 400', async () => {
    expectError(await get('/api/v1/signals/eth?include_factors=maybe'), 400, 'INVALID_PARAMETER');
  });
});

describe('GET /api/v1/regime', () => {
  test('returns the regime, its conditions and all signals', async () => {
    const r = await get('/api/v1/regime');
    assert.equal(r.status, 200);
    const env = okEnvelope(RegimeDataSchema).parse(r.body);
    assert.ok(['bull', 'bear', 'neutral'].includes(env.data.regime));
    assert.equal(env.data.signals.length, 11);
    assert.equal(env.data.conditions.rsi!.period, 14);
    const fg = readCsv('fear_greed.csv').at(-1)!;
    assert.equal(env.data.conditions.fear_greed!.value, Number(fg.value));
    assert.equal(env.data.conditions.fear_greed!.classification, fg.classification);
    const f = readCsv('funding/btc_daily.csv').at(-1)!;
    assert.ok(Math.abs(env.data.conditions.funding_rate!.value - Number(f.funding_rate_mean)) < 1e-12);
    assert.ok(env.data.since <= env.data.as_of);
  });
});

describe('GET /api/v1/chain-health', () => {
  test('returns eth, sol and hype', async () => {
    const env = okEnvelope(ChainHealthListSchema).parse((await get('/api/v1/chain-health')).body);
    assert.deepEqual(env.data.chains.map((c) => c.chain), ['eth', 'sol', 'hype']);
    // Solana's chain data stops on 2025-06-03: reported as stale, not scored from old data.
    const sol = env.data.chains.find((c) => c.chain === 'sol')!;
    assert.equal(sol.status, 'insufficient_data');
    assert.equal(sol.score, null);
    assert.ok(sol.missing_metrics.some((m) => m.metric === 'tvl' && m.last_date === '2025-06-03'));
  });

  test('one chain by id, asset id or ticker; unknown is 404', async () => {
    for (const q of ['eth', 'ETH', 'ethereum']) {
      const env = okEnvelope(ChainHealthSchema).parse((await get(`/api/v1/chain-health/${q}`)).body);
      assert.equal(env.data.chain, 'eth');
    }
    const r = await get('/api/v1/chain-health/xyz');
    expectError(r, 404, 'NOT_FOUND');
    assert.equal(r.body.error.message, "Asset 'xyz' not found");
    expectError(await get('/api/v1/chain-health/bitcoin'), 404, 'NOT_FOUND');
  });
});

describe('GET /api/v1/chain-metrics/{asset}', () => {
  test('raw metrics with 7-day deltas from the dataset', async () => {
    const env = okEnvelope(ChainMetricsSchema).parse((await get('/api/v1/chain-metrics/eth')).body);
    const tx = env.data.metrics.transactions!;
    const rows = readCsv('chains/ethereum.csv');
    const last = rows.at(-1)!;
    const base = rows.find((x) => x.date === '2025-09-23')!;
    assert.equal(tx.value, Number(last.transactions));
    assert.equal(tx.as_of, last.date);
    assert.equal(tx.change_7d, Number(last.transactions) - Number(base.transactions));
    // A metric with no data is present with value null (stable shape).
    assert.equal(env.data.metrics.dex_volume!.value, null);
    // TVL stopped on 2025-08-02: its value carries its own as_of.
    assert.equal(env.data.metrics.tvl!.as_of, '2025-08-02');
  });

  test('unknown chain is 404', async () => {
    expectError(await get('/api/v1/chain-metrics/xyz'), 404, 'NOT_FOUND');
  });
});

describe('GET /api/v1/assets', () => {
  test('lists the 11 assets with signals and capability flags', async () => {
    const env = okEnvelope(AssetsDataSchema).parse((await get('/api/v1/assets')).body);
    assert.equal(env.data.assets.length, 11);
    const eth = env.data.assets.find((a) => a.asset === 'ethereum')!;
    assert.equal(eth.chain, 'eth');
    assert.equal(eth.capabilities.chain_health, true);
    assert.equal(eth.capabilities.funding_rate, true);
    const doge = env.data.assets.find((a) => a.asset === 'dogecoin')!;
    assert.equal(doge.chain, null);
    assert.equal(doge.capabilities.chain_health, false);
    assert.equal(doge.capabilities.funding_rate, false);
  });
});

describe('GET /api/v1/signal-history/{asset}', () => {
  test('returns stored changes newest first within the window', async () => {
    const env = okEnvelope(HistoryDataSchema).parse((await get('/api/v1/signal-history/bitcoin?days=365&limit=200')).body);
    assert.equal(env.data.days, 365);
    assert.equal(env.data.limit, 200);
    assert.ok(env.data.entries.length > 0);
    for (let i = 1; i < env.data.entries.length; i++) assert.ok(env.data.entries[i - 1]!.changed_at > env.data.entries[i]!.changed_at);
    for (const e of env.data.entries) {
      assert.ok(e.changed_at >= '2024-10-01' && e.changed_at <= '2025-09-30');
      assert.notEqual(e.signal, e.previous_signal);
    }
    const lim = okEnvelope(HistoryDataSchema).parse((await get('/api/v1/signal-history/btc?days=365&limit=1')).body);
    assert.equal(lim.data.entries.length, 1);
    assert.deepEqual(lim.data.entries[0], env.data.entries[0]);
  });

  test('defaults are days=30, limit=50', async () => {
    const env = okEnvelope(HistoryDataSchema).parse((await get('/api/v1/signal-history/ethereum')).body);
    assert.equal(env.data.days, 30);
    assert.equal(env.data.limit, 50);
  });

  test('out-of-range or non-integer days/limit are 400 (no clamping)', async () => {
    for (const q of ['days=0', 'days=366', 'days=1.5', 'limit=abc', 'limit=0', 'limit=201', 'days=-3', 'days=0x10', 'days=1e2', 'limit=0b11', 'days=']) {
      const r = await get(`/api/v1/signal-history/bitcoin?${q}`);
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.match(r.body.error.message, new RegExp(q.split('=')[0]!));
    }
  });

  test('unknown asset is 404', async () => {
    expectError(await get('/api/v1/signal-history/xyz'), 404, 'NOT_FOUND');
  });
});

describe('errors, docs and probes', () => {
  test('malformed URLs, over-long path parameters and control characters are 400 in the envelope', async () => {
    expectError(await get('/api/v1/chain-health/%E0%A4%A'), 400, 'INVALID_PARAMETER');
    expectError(await get(`/api/v1/signals/${'a'.repeat(300)}`), 400, 'INVALID_PARAMETER');
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/thesis',
      headers: { authorization: `Bearer ${proKey}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ asset: 'btc', direction: 'long', title: 'a\u0000b' }),
      remoteAddress: '10.0.200.1',
    });
    expectError({ status: res.statusCode, body: res.json() }, 400, 'INVALID_PARAMETER');
    assert.match(res.json().error.message, /title/);
  });

  test('unknown route is a 404 in the envelope', async () => {
    const r = await get('/api/v1/nope');
    expectError(r, 404, 'NOT_FOUND');
    expectError(await get('/nothing/here'), 404, 'NOT_FOUND');
  });

  test('an unexpected exception is 500 INTERNAL_ERROR with no internals', async () => {
    const r = await get('/api/v1/__boom');
    expectError(r, 500, 'INTERNAL_ERROR');
    assert.doesNotMatch(r.raw, /secret|\/srv|stack|at /);
  });

  test('OpenAPI 3 document lists every endpoint', async () => {
    const r = await get('/api/v1/openapi.json');
    assert.equal(r.status, 200);
    assert.match(r.body.openapi, /^3\./);
    for (const p of ['/api/v1/signals', '/api/v1/signals/{asset}', '/api/v1/regime', '/api/v1/chain-health', '/api/v1/chain-health/{asset}', '/api/v1/chain-metrics/{asset}', '/api/v1/assets', '/api/v1/signal-history/{asset}']) {
      assert.ok(r.body.paths[p]?.get, p);
    }
    const days = r.body.paths['/api/v1/signal-history/{asset}'].get.parameters.find((p: any) => p.name === 'days');
    assert.equal(days.schema.maximum, 365);
  });

  test('/docs serves the API reference from local files (no CDN)', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs/' });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /swagger-ui/i);
    assert.doesNotMatch(res.body, /https?:\/\/(?!localhost)[a-z0-9.-]+\/.*\.(js|css)/i);
    const init = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    assert.equal(init.statusCode, 200);
  });

  test('/healthz and /readyz', async () => {
    assert.equal((await get('/healthz')).status, 200);
    const r = await get('/readyz');
    assert.equal(r.status, 200);
    assert.equal(r.body.checks.database, true);
  });

  test('every success response validates against its schema', async () => {
    const cases: [string, z.ZodType][] = [
      ['/api/v1/chain-metrics/sol', ChainMetricsSchema],
      ['/api/v1/chain-metrics/hype', ChainMetricsSchema],
      ['/api/v1/chain-health/hype', ChainHealthSchema],
    ];
    for (const [u, s] of cases) okEnvelope(s).parse((await get(u)).body);
  });
});
