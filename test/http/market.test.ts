import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { z } from 'zod';
import { okEnvelope } from '../../src/http/envelope.ts';
import {
  AssetsDataSchema,
  ChainHealthListSchema,
  ChainHealthSchema,
  ChainMetricsSchema,
  HistoryDataSchema,
  type HistoryEntry,
  PricesDataSchema,
  RegimeDataSchema,
  SignalEntrySchema,
  SignalsDataSchema,
} from '../../src/services/schemas/market.ts';
import { TrackRecordSchema } from '../../src/services/schemas/track-record.ts';
import { REPORT_DIGITS, roundFigures, runBacktest } from '../../src/services/backtest.ts';
import { SUCCESS_EXAMPLES } from '../../src/http/openapi-examples.ts';
import { CURRENT_MODEL } from '../../src/engine/signal.ts';
import { readCsv } from '../helpers/env.ts';
import { expectError, harnessUnavailable, startHarness, testDatabase, type Harness } from '../helpers/harness.ts';
import { BAD_CREDENTIALS, runSharedSecurityTests, securityContext } from '../helpers/security.ts';

/**
 * The market resources (public data, and the signal history for the pro and api tiers):
 * signals, regime, chains (health and metrics), assets, signal history. One harness for the
 * file; each resource has its happy, errors and security parts.
 */

const PRICE_FILES: Record<string, string> = {
  bitcoin: 'btc',
  ethereum: 'eth',
  solana: 'sol',
  hyperliquid: 'hype',
  binancecoin: 'bnb',
  ripple: 'xrp',
  dogecoin: 'doge',
  cardano: 'ada',
  'avalanche-2': 'avax',
  chainlink: 'link',
  litecoin: 'ltc',
};

const DATABASE = testDatabase();
const SKIP = (await harnessUnavailable({ database: DATABASE })) ?? undefined;
let h: Harness;
let proKey = '';
const harness = () => h;

/**
 * GETs as a new unauthenticated client (its own IP) so the 5/minute unauthenticated limit
 * does not interfere; /signal-history (Pro or API tier) is called with a Pro key.
 */
async function get(url: string) {
  return h.request('GET', url, { token: url.includes('/signal-history/') ? proKey : undefined });
}

before(async () => {
  if (SKIP) return;
  h = await startHarness({ database: DATABASE });
  proKey = (await h.keyFor('pro', 'contract-pro')).key;
});
after(async () => h?.stop());

describe('signals', { skip: SKIP }, () => {
  describe('happy', () => {
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
          assert.equal(s.model_version, 'signals-v4', 'says which model produced it');
          assert.equal(s.factors, undefined, 'factors only on request');
          const prev = rows.find((x) => x.date === '2025-09-29')!;
          assert.ok(Math.abs(s.change_24h_pct! - (Number(row.close) / Number(prev.close) - 1) * 100) < 1e-3);
        }
        assert.equal(r.headers['x-request-id'], env.meta.request_id);
      });

      test('level_rule says why each level reads as it does; on 2025-05-27 the volatility gate holds BTC at neutral', async () => {
        const r = await get('/api/v1/signals');
        const env = okEnvelope(SignalsDataSchema).parse(r.body);
        assert.equal(env.data.signals.length, 11);
        for (const s of env.data.signals) {
          // On the bundled as-of day every asset is neutral and its score in the neutral band.
          assert.equal(s.level_rule.score_level, s.signal, s.asset);
          assert.equal(s.level_rule.reason, 'band', s.asset);
          assert.equal(s.level_rule.volatility_gate?.open, true, s.asset);
          assert.match(s.level_rule.explanation, new RegExp(`^Score ${s.score} is in the neutral band`));
        }
        // A day the gate was closed for BTC (from the bundled data): the score says buy, the signal neutral.
        const past = await startHarness({ config: { AS_OF: '2025-05-27' } });
        try {
          const one = await past.request('GET', '/api/v1/signals/bitcoin');
          const btc = okEnvelope(SignalEntrySchema).parse(one.body).data;
          assert.equal(btc.signal, 'neutral');
          assert.equal(btc.level_rule.score_level, 'buy');
          assert.equal(btc.level_rule.reason, 'volatility_gate');
          assert.equal(btc.level_rule.volatility_gate!.open, false);
          assert.ok(btc.level_rule.volatility_gate!.downside_ratio! > btc.level_rule.volatility_gate!.max);
          assert.match(btc.level_rule.explanation, /buys are held at neutral while the 90-day downside semideviation/);
        } finally {
          await past.stop();
        }
      });

      test('include_factors=true adds factors whose contributions sum to the score', async () => {
        const r = await get('/api/v1/signals?include_factors=true');
        const env = okEnvelope(SignalsDataSchema).parse(r.body);
        for (const s of env.data.signals) {
          assert.ok(s.factors && s.factors.length > 0, s.asset);
          const sum = s.factors.reduce((a, f) => a + f.contribution, 0);
          assert.ok(Math.abs(sum - s.score) < 1e-6, `${s.asset}: ${sum} vs ${s.score}`);
          const names: string[] = s.factors.map((f): string => f.name).concat(s.missing_factors!.map((f) => f.name));
          // Model v2's factors (its own-asset trend has weight 0 and is not part of it).
          for (const n of ['momentum', 'rsi', 'fear_greed', 'funding_rate', 'regime']) assert.ok(names.includes(n), `${s.asset} ${n}`);
        }
        // Assets without funding history report the factor as missing instead of inventing it.
        const doge = env.data.signals.find((s) => s.asset === 'dogecoin')!;
        assert.ok(doge.missing_factors!.some((f) => f.name === 'funding_rate'));
        const btc = env.data.signals.find((s) => s.asset === 'bitcoin')!;
        assert.ok(btc.factors!.some((f) => f.name === 'funding_rate'));
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
        const hy = okEnvelope(SignalEntrySchema).parse((await get('/api/v1/signals/HYPE?include_factors=true')).body);
        assert.equal(hy.data.asset, 'hyperliquid');
        assert.ok(hy.data.factors!.length > 0);
      });
    });
  });

  describe('errors', () => {
    describe('GET /api/v1/signals', () => {
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
      test('unknown asset is 404 NOT_FOUND naming the asset as given and the assets there are', async () => {
        const r = await get('/api/v1/signals/xyz');
        expectError(r, 404, 'NOT_FOUND');
        assert.match(
          r.body.error.message,
          /^Asset 'xyz' not found: use one of bitcoin \(BTC\), ethereum \(ETH\), .*litecoin \(LTC\), by id or ticker/,
        );
        const assets = (await get('/api/v1/assets')).body.data.assets.map((a: { asset: string }) => a.asset);
        assert.deepEqual(r.body.error.details.assets, assets);
      });

      test('bad include_factors is 400', async () => {
        expectError(await get('/api/v1/signals/eth?include_factors=maybe'), 400, 'INVALID_PARAMETER');
      });
    });

    test('an undeclared query parameter is 400 naming it and the accepted ones, not ignored (as_of would look honoured)', async () => {
      const cases: [string, string, RegExp][] = [
        ['/api/v1/signals/btc?as_of=2024-01-01', 'as_of', /^Unknown query parameter 'as_of'; accepted: include_factors$/],
        ['/api/v1/signals?include_factor=true', 'include_factor', /^Unknown query parameter 'include_factor'; accepted: include_factors$/],
        ['/api/v1/signal-history/btc?from=2024-01-01&days=30', 'from', /^Unknown query parameter 'from'; accepted: days, limit, end$/],
        ['/api/v1/prices/btc?from=1&to=2', 'from', /^Unknown query parameters 'from', 'to'; accepted: days$/],
        ['/api/v1/regime?date=2024-01-01', 'date', /^Unknown query parameter 'date'; this takes no query parameters$/],
      ];
      for (const [url, field, message] of cases) {
        const r = await get(url);
        expectError(r, 400, 'INVALID_PARAMETER');
        assert.match(r.body.error.message, message, url);
        assert.deepEqual(r.body.error.details, { location: 'querystring', field }, url);
      }
      // The declared ones still work, and a bare '?' is no parameter.
      assert.equal((await get('/api/v1/signal-history/btc?days=30&limit=5')).status, 200);
      assert.equal((await get('/api/v1/regime?')).status, 200);
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, { name: 'GET /signals', method: 'GET', path: () => '/api/v1/signals', policy: 'public' });
    runSharedSecurityTests(harness, { name: 'GET /signals/{asset}', method: 'GET', path: () => '/api/v1/signals/btc', policy: 'public' });
  });
});

describe('regime', { skip: SKIP }, () => {
  describe('happy', () => {
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
  });

  describe('errors', () => {
    test('GET /api/v1/regime takes no path below it: 404 in the envelope', async () => {
      expectError(await get('/api/v1/regime/btc'), 404, 'NOT_FOUND');
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, { name: 'GET /regime', method: 'GET', path: () => '/api/v1/regime', policy: 'public' });
  });
});

describe('chains', { skip: SKIP }, () => {
  describe('happy', () => {
    describe('GET /api/v1/chain-health', () => {
      test('returns eth, sol and hype', async () => {
        const env = okEnvelope(ChainHealthListSchema).parse((await get('/api/v1/chain-health')).body);
        assert.deepEqual(
          env.data.chains.map((c) => c.chain),
          ['eth', 'sol', 'hype'],
        );
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
        assert.match(r.body.error.message, /^No chain data for 'xyz': /);
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
        // A delta of decimals reads as the dataset's digits, without binary noise.
        const significant = (x: number) => String(Math.abs(x)).replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').length;
        const deltas = Object.entries(env.data.metrics).filter(([, m]) => m.change_7d !== null);
        assert.ok(deltas.length >= 3);
        for (const [name, m] of deltas) assert.ok(significant(m.change_7d!) <= 12, `${name} ${m.change_7d}`);
        // A metric with no data is present with value null (stable shape).
        assert.equal(env.data.metrics.dex_volume!.value, null);
        // TVL stopped on 2025-08-02: its value carries its own as_of.
        assert.equal(env.data.metrics.tvl!.as_of, '2025-08-02');
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
  });

  describe('errors', () => {
    describe('GET /api/v1/chain-metrics/{asset}', () => {
      test('unknown chain is 404', async () => {
        expectError(await get('/api/v1/chain-metrics/xyz'), 404, 'NOT_FOUND');
      });
    });

    describe('GET /api/v1/chain-health/{asset} and /chain-metrics/{asset}', () => {
      test('an asset without chain data (btc) is 404 naming the chains there are: eth, sol, hype', async () => {
        for (const path of ['/api/v1/chain-health/btc', '/api/v1/chain-metrics/btc']) {
          const r = await get(path);
          expectError(r, 404, 'NOT_FOUND');
          assert.equal(
            r.body.error.message,
            "No chain data for 'btc': chain health and metrics cover the chains eth (Ethereum), sol (Solana) and hype (Hyperliquid); use one of these ids (or the chain's asset id or ticker)",
            path,
          );
          assert.deepEqual(r.body.error.details, { chains: ['eth', 'sol', 'hype'] }, path);
        }
      });
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, { name: 'GET /chain-health', method: 'GET', path: () => '/api/v1/chain-health', policy: 'public' });
    runSharedSecurityTests(harness, {
      name: 'GET /chain-health/{asset}',
      method: 'GET',
      path: () => '/api/v1/chain-health/eth',
      policy: 'public',
    });
    runSharedSecurityTests(harness, {
      name: 'GET /chain-metrics/{asset}',
      method: 'GET',
      path: () => '/api/v1/chain-metrics/eth',
      policy: 'public',
    });
  });
});

describe('assets', { skip: SKIP }, () => {
  describe('happy', () => {
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
  });

  describe('errors', () => {
    test('GET /api/v1/assets/{x} is not a route: 404 in the envelope', async () => {
      expectError(await get('/api/v1/assets/bitcoin'), 404, 'NOT_FOUND');
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, { name: 'GET /assets', method: 'GET', path: () => '/api/v1/assets', policy: 'public' });

    test('public routes: a present but invalid key is 401, never a silent downgrade', async () => {
      const ctx = await securityContext(h);
      for (const u of ['/api/v1/signals', '/api/v1/regime', '/api/v1/assets', '/api/v1/chain-health', '/api/v1/chain-metrics/eth']) {
        for (const [, tok] of BAD_CREDENTIALS.slice(1)) {
          assert.equal((await h.request('GET', u, { token: tok(ctx) })).status, 401, u);
        }
        assert.equal((await h.request('GET', u, { token: ctx.ownerJwt })).status, 401, `${u} with a JWT`);
      }
    });
  });
});

describe('signal history', { skip: SKIP }, () => {
  describe('happy', () => {
    describe('GET /api/v1/signal-history/{asset}', () => {
      test('returns stored changes newest first within the window', async () => {
        const env = okEnvelope(HistoryDataSchema).parse((await get('/api/v1/signal-history/bitcoin?days=365&limit=200')).body);
        assert.equal(env.data.days, 365);
        assert.equal(env.data.limit, 200);
        assert.equal(env.data.model_version, 'signals-v4');
        assert.ok(env.data.entries.length > 0);
        assert.ok(env.data.entries.every((e) => e.model_version === 'signals-v4'));
        for (let i = 1; i < env.data.entries.length; i++) assert.ok(env.data.entries[i - 1]!.changed_at > env.data.entries[i]!.changed_at);
        for (const e of env.data.entries) {
          assert.ok(e.changed_at >= '2024-10-01' && e.changed_at <= '2025-09-30');
          assert.notEqual(e.signal, e.previous_signal);
        }
        const lim = okEnvelope(HistoryDataSchema).parse((await get('/api/v1/signal-history/btc?days=365&limit=1')).body);
        assert.equal(lim.data.entries.length, 1);
        assert.deepEqual(lim.data.entries[0], env.data.entries[0]);
      });

      test('each change says why the signal took its level that day (level_rule, as the engine computed it), exits by the volatility gate included', async () => {
        const entries: HistoryEntry[] = [];
        for (const end of ['2025-09-30', '2024-09-30', '2023-09-30', '2022-09-30', '2021-09-30'])
          entries.push(
            ...okEnvelope(HistoryDataSchema).parse((await get(`/api/v1/signal-history/ripple?days=365&limit=200&end=${end}`)).body).data
              .entries,
          );
        const series = h.svc.market.signalSeries.get('ripple')!;
        const byDay = new Map(series.map((s) => [s.as_of, s]));
        assert.ok(entries.length > 10);
        for (const e of entries) {
          assert.ok(e.level_rule, `${e.changed_at}: level_rule stored`);
          assert.deepEqual(e.level_rule, JSON.parse(JSON.stringify(byDay.get(e.changed_at)!.level_rule)), e.changed_at);
        }
        // A buy left for neutral while the score stayed in a buy band: the history says it was the gate
        // (XRP 2024-12-09, strong_buy to neutral).
        const gated = entries.find((e) => e.signal === 'neutral' && e.level_rule?.reason === 'volatility_gate');
        assert.ok(gated, 'some change to neutral was made by the volatility gate');
        assert.match(gated.level_rule!.explanation, /downside semideviation/);
        // As sent (the JSON text's order, before any schema parse), a history entry's level_rule
        // has the keys of GET /signals/{asset}'s, in the same order, nested objects too.
        const keyPaths = (v: unknown, prefix = ''): string[] =>
          v === null || typeof v !== 'object' || Array.isArray(v)
            ? []
            : Object.entries(v).flatMap(([k, x]) => [prefix + k, ...keyPaths(x, `${prefix}${k}.`)]);
        const today = (await get('/api/v1/signals/ripple')).body.data.level_rule;
        const sent = (await get('/api/v1/signal-history/ripple?days=365&limit=200&end=2024-12-31')).body.data.entries as HistoryEntry[];
        const pendingToday = keyPaths({ ...today, pending: { signal: 'buy', days: 1, needed: 3 } });
        for (const e of sent)
          assert.deepEqual(keyPaths(e.level_rule), e.level_rule!.pending ? pendingToday : keyPaths(today), `${e.changed_at}: key order`);
        assert.deepEqual(Object.keys(sent[0]!.level_rule!), [
          'score_level',
          'reason',
          'bands',
          'volatility_gate',
          'pending',
          'explanation',
        ]);
        // Its factors too: the keys of GET /signals/{asset}?include_factors=true's, in that order.
        const factorKeys = Object.keys((await get('/api/v1/signals/ripple?include_factors=true')).body.data.factors[0]);
        assert.deepEqual(factorKeys.slice(0, 3), ['name', 'value', 'unit']);
        for (const e of sent) for (const f of e.factors) assert.deepEqual(Object.keys(f), factorKeys, `${e.changed_at}: factor key order`);
      });

      test('defaults are days=30, limit=50, ending at the as-of day', async () => {
        const env = okEnvelope(HistoryDataSchema).parse((await get('/api/v1/signal-history/ethereum')).body);
        assert.equal(env.data.days, 30);
        assert.equal(env.data.limit, 50);
        assert.equal(env.data.to, '2025-09-30');
        assert.equal(env.data.from, '2025-09-01');
      });

      test('end moves the window back; paging with next_end reads the older changes in turn, skipping empty windows', async () => {
        const hist = async (q: string) => okEnvelope(HistoryDataSchema).parse((await get(`/api/v1/signal-history/bitcoin?${q}`)).body).data;
        const year = await hist('days=365&limit=200&end=2022-06-30');
        assert.equal(year.from, '2021-07-01');
        assert.equal(year.to, '2022-06-30');
        assert.ok(year.entries.length >= 3, `${year.entries.length} changes`);
        assert.ok(year.entries.every((e) => e.changed_at >= '2021-07-01' && e.changed_at <= '2022-06-30'));
        // A snapshot's sources name the data up to its day, not the file's later rows.
        for (const e of year.entries) {
          const days = e.factors.flatMap((f) => f.source.match(/\d{4}-\d{2}-\d{2}/g) ?? []);
          assert.ok(days.length > 0 && days.every((d) => d <= e.changed_at), `${e.changed_at}: ${days.join(' ')}`);
          assert.ok(
            e.factors.some((f) => f.source.includes(`..${e.changed_at}`)),
            e.factors.map((f) => f.source).join(' | '),
          );
        }
        // Two at a time with next_end: the same changes, in order, then on to older windows.
        const paged: string[] = [];
        let end: string | null = '2022-06-30';
        while (end !== null && end >= '2021-07-01') {
          const page: typeof year = await hist(`days=365&limit=2&end=${end}`);
          paged.push(...page.entries.filter((e) => e.changed_at >= '2021-07-01').map((e) => e.changed_at));
          end = page.next_end;
        }
        assert.deepEqual(
          paged,
          year.entries.map((e) => e.changed_at),
        );
        // Paging to the start: the whole stored history, then next_end null.
        let all = 0;
        let pages = 0;
        for (let e: string | null = '2025-09-30'; e !== null; pages++) {
          const page: typeof year = await hist(`days=365&limit=200&end=${e}`);
          all += page.entries.length;
          e = page.next_end;
          assert.ok(pages < 20, 'paging ends');
        }
        const stored = await h.svc.repos.history.listChanges('bitcoin', '1970-01-01', '2025-09-30', 10_000, 'signals-v4');
        assert.equal(all, stored.length);
        // With the default 30-day window, every answer but the last holds a change: next_end is
        // the day of the next older change, so no call reads an empty window.
        let calls = 0;
        let changes = 0;
        for (let e: string | null = '2025-09-30'; e !== null; calls++) {
          const page: typeof year = await hist(`limit=200&end=${e}`);
          if (calls > 0) assert.ok(page.entries.length > 0, `the window ending ${e} holds the change next_end named`);
          if (calls > 0) assert.equal(page.entries[0]!.changed_at, e);
          changes += page.entries.length;
          e = page.next_end;
          assert.ok(calls < stored.length + 2, 'paging ends');
        }
        assert.equal(changes, stored.length);
        // Before the data: an empty window and nothing older, not an error.
        const before = await hist('end=2015-01-31');
        assert.deepEqual(before.entries, []);
        assert.equal(before.next_end, null);
        const early = await hist('end=1970-06-01&days=365');
        assert.deepEqual([early.from, early.entries, early.next_end], ['1969-06-02', [], null]);
      });

      test('the api tier reads the history too', async () => {
        const api = await h.keyFor('api');
        const r = await h.request('GET', '/api/v1/signal-history/bitcoin', { token: api.key });
        assert.equal(r.status, 200, r.raw);
        assert.equal(r.headers['x-service-tier'], 'api');
      });
    });
  });

  describe('errors', () => {
    describe('GET /api/v1/signal-history/{asset}', () => {
      test('out-of-range or non-integer days/limit are 400 (no clamping)', async () => {
        for (const q of [
          'days=0',
          'days=366',
          'days=1.5',
          'limit=abc',
          'limit=0',
          'limit=201',
          'days=-3',
          'days=0x10',
          'days=1e2',
          'limit=0b11',
          'days=',
        ]) {
          const r = await get(`/api/v1/signal-history/bitcoin?${q}`);
          expectError(r, 400, 'INVALID_PARAMETER');
          assert.match(r.body.error.message, new RegExp(q.split('=')[0]!));
        }
      });

      test('end after the as-of day, or not a calendar day, is 400 naming end and what to give', async () => {
        const late = await get('/api/v1/signal-history/bitcoin?end=2025-10-01');
        expectError(late, 400, 'INVALID_PARAMETER');
        assert.equal(
          late.body.error.message,
          "Invalid query parameter 'end': 2025-10-01 is after the as-of day 2025-09-30; give 2025-09-30 or earlier (or leave it out)",
        );
        // Refused by the service (after the as-of day) or by the schema (below): the same details.
        assert.deepEqual(late.body.error.details, { location: 'querystring', field: 'end' });
        for (const [q, re] of [
          ['end=2025-02-30', /'end'.*not a calendar day/],
          ['end=yesterday', /'end'.*must be a day YYYY-MM-DD/],
          ['end=2025-13-45', /'end'.*not a calendar day/],
          ['end=0000-06-01', /'end': 0000-06-01 is before 1970-01-01/],
          ['end=1969-12-31', /^Invalid query parameter 'end': 1969-12-31 is before 1970-01-01: the stored history starts later/],
        ] as const) {
          const r = await get(`/api/v1/signal-history/bitcoin?${q}`);
          expectError(r, 400, 'INVALID_PARAMETER');
          assert.match(r.body.error.message, re);
          assert.deepEqual(r.body.error.details, { location: 'querystring', field: 'end' }, q);
        }
      });

      test('unknown asset is 404', async () => {
        expectError(await get('/api/v1/signal-history/xyz'), 404, 'NOT_FOUND');
      });
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, {
      name: 'GET /signal-history/{asset}',
      method: 'GET',
      path: () => '/api/v1/signal-history/bitcoin',
      policy: 'api-key',
      tiers: ['pro', 'api'],
    });
  });
});

describe('prices', { skip: SKIP }, () => {
  describe('happy', () => {
    test('GET /api/v1/prices/{asset}: the dataset candles of the window, oldest first, with as_of and source', async () => {
      const r = await get('/api/v1/prices/BTC?days=30');
      assert.equal(r.status, 200, r.raw);
      const p = okEnvelope(PricesDataSchema).parse(r.body).data;
      assert.equal(p.asset, 'bitcoin');
      assert.equal(p.days, 30);
      assert.equal(p.as_of, '2025-09-30');
      assert.match(p.source, /btc\.csv/);
      const rows = readCsv('prices/btc.csv').filter((x) => x.date! >= '2025-09-01' && x.date! <= '2025-09-30');
      assert.equal(p.candles.length, rows.length);
      assert.deepEqual(
        p.candles,
        rows.map((x) => ({
          date: x.date,
          open: Number(x.open),
          high: Number(x.high),
          low: Number(x.low),
          close: Number(x.close),
          volume: Number(x.volume),
        })),
      );
      // The markers: the level changes in the window are the stored signal history's (dates and
      // levels). A year's window, so that it holds changes (the model holds a level ~20 days).
      const year = okEnvelope(PricesDataSchema).parse((await get('/api/v1/prices/BTC?days=365')).body).data;
      const hist = await get('/api/v1/signal-history/bitcoin?days=365&limit=200');
      const stored = HistoryDataSchema.parse(hist.body.data).entries.filter((e) => e.changed_at > year.candles[0]!.date);
      assert.deepEqual(
        year.signal_changes,
        stored.reverse().map((e) => ({ date: e.changed_at, signal: e.signal, previous_signal: e.previous_signal })),
      );
      assert.ok(year.signal_changes.length >= 1);
      assert.ok(year.signal_at_start);
      assert.ok(p.signal_at_start);
    });

    test('days defaults to 90 and goes up to 365', async () => {
      const d = (await get('/api/v1/prices/ethereum')).body.data;
      assert.equal(d.days, 90);
      assert.equal(d.candles[0].date, '2025-07-03');
      const y = (await get('/api/v1/prices/eth?days=365')).body.data;
      assert.equal(y.candles.length, 365);
      assert.equal(y.candles.at(-1).date, '2025-09-30');
    });
  });

  describe('errors', () => {
    test('days outside 1..365 or not an integer is 400 naming the parameter; an unknown asset is 404', async () => {
      for (const q of ['0', '366', 'abc', '1.5', '-3', '1e2']) {
        const r = await get(`/api/v1/prices/btc?days=${q}`);
        expectError(r, 400, 'INVALID_PARAMETER');
        assert.match(r.body.error.message, /days/);
      }
      const nf = await get('/api/v1/prices/NOPE');
      expectError(nf, 404, 'NOT_FOUND');
      assert.match(nf.body.error.message, /NOPE/);
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, { name: 'GET /prices/{asset}', method: 'GET', path: () => '/api/v1/prices/btc', policy: 'public' });
  });
});

describe('track record', { skip: SKIP }, () => {
  describe('happy', () => {
    test('GET /api/v1/track-record: public, the walk-forward report of the served model per asset and pooled, no live period yet', async () => {
      const r = await get('/api/v1/track-record');
      assert.equal(r.status, 200, r.raw);
      const env = okEnvelope(TrackRecordSchema).parse(r.body);
      const d = env.data;
      assert.equal(d.model_version, CURRENT_MODEL.version);
      assert.equal(d.walk_forward.mode, 'walk_forward');
      assert.equal(d.walk_forward.from, '2020-01-01');
      assert.equal(d.walk_forward.to, '2025-09-30');
      assert.equal(d.walk_forward.cost_bps, 10);
      assert.equal(d.walk_forward.assets.length, 11);
      assert.deepEqual(
        d.walk_forward.choices.map((c) => c.year),
        [2020, 2021, 2022, 2023, 2024, 2025],
      );
      for (const c of d.walk_forward.choices) assert.ok(c.trained_through < `${c.year}-01-01`, 'chosen on earlier data only');
      // The same figures as the backtest command computes (one implementation), rounded as published.
      assert.deepEqual(
        d.walk_forward,
        JSON.parse(JSON.stringify(roundFigures(runBacktest(h.svc.market, { from: '2020-01-01', walkForward: true })))),
      );
      // Every figure has at most REPORT_DIGITS significant digits (no float noise such as 0.1 + 0.2).
      const figures = (v: unknown): number[] =>
        typeof v === 'number' ? [v] : v !== null && typeof v === 'object' ? Object.values(v).flatMap(figures) : [];
      const all = figures(d);
      assert.ok(all.some((x) => !Number.isInteger(x)));
      for (const x of all) if (!Number.isInteger(x)) assert.equal(x, Number(x.toPrecision(REPORT_DIGITS)), String(x));
      // The OpenAPI example shows the served figures (its confidence tables and year list shortened).
      const ex = (SUCCESS_EXAMPLES.getTrackRecord as { walk_forward: typeof d.walk_forward }).walk_forward;
      const noConfidence = <T extends { confidence: unknown }>({ confidence: _c, ...rest }: T) => rest;
      assert.deepEqual(noConfidence(ex.pooled), noConfidence(d.walk_forward.pooled));
      assert.deepEqual(noConfidence(ex.assets[0]!), noConfidence(d.walk_forward.assets.find((a) => a.asset === ex.assets[0]!.asset)!));
      const year = d.walk_forward.choices.find((c) => c.year === ex.choices[0]!.year)!;
      assert.deepEqual(ex.choices[0]!.bands, year.bands);
      assert.ok(
        year.candidates.some((c) => JSON.stringify(c) === JSON.stringify(ex.choices[0]!.candidates[0])),
        'the example candidate is one of the served ones',
      );
      // Each year on its own, as docs/track-record.md's "By year" table.
      assert.deepEqual(
        d.by_year.map((y) => [y.year, y.pooled.from, y.pooled.to, y.long_flat_sharpe_wins.of]),
        [2020, 2021, 2022, 2023, 2024, 2025].map((y) => [y, `${y}-01-01`, y === 2025 ? '2025-09-30' : `${y}-12-31`, y < 2024 ? 10 : 11]),
      );
      const exYear = (SUCCESS_EXAMPLES.getTrackRecord as { by_year: typeof d.by_year }).by_year[0]!;
      const served = d.by_year.find((y) => y.year === exYear.year)!;
      assert.deepEqual({ ...exYear, pooled: noConfidence(exYear.pooled) }, { ...served, pooled: noConfidence(served.pooled) });
      assert.equal(d.live.from, '2025-10-01');
      // No live day yet: no last day either (not the as-of day 2025-09-30, which is before `from`).
      assert.equal(d.live.to, null);
      assert.equal(d.live.days, 0);
      assert.equal(d.live.report, null);
      assert.match(d.live.note, /^signals-v4 was built on data through 2025-09-30; .* so there is no day after that to score yet\.$/);
      // Served from the memo afterwards: the same answer.
      const again = await get('/api/v1/track-record');
      assert.equal(again.status, 200);
      assert.deepEqual(again.body.data, r.body.data);
    });
  });
  describe('errors', () => {
    test('GET /api/v1/track-record takes no path below it: 404 in the envelope', async () => {
      expectError(await get('/api/v1/track-record/btc'), 404, 'NOT_FOUND');
    });
  });
});
