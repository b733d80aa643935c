import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, ClientRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { MCP_MAX_BATCH } from '../../src/mcp/http.ts';
import { MCP_METHODS, methodNotFoundMessage } from '../../src/mcp/server.ts';
import { AUTH_FAILURES_PER_MINUTE, MCP_CONTROL_REQUESTS_PER_MINUTE, mcpControlCap } from '../../src/services/access.ts';
import { TOOL_NAMES } from '../../src/mcp/tool.ts';
import { GetChainHealthOutput, GetSignalsOutput } from '../../src/mcp/tools/index.ts';
import { getAssetsTool } from '../../src/mcp/tools/get-assets.ts';
import { getChainHealthTool } from '../../src/mcp/tools/get-chain-health.ts';
import { getSignalHistoryTool } from '../../src/mcp/tools/get-signal-history.ts';
import { getSignalsTool } from '../../src/mcp/tools/get-signals.ts';
import { getThesisHealthTool } from '../../src/mcp/tools/get-thesis-health.ts';
import {
  type AssetsData,
  AssetsDataSchema,
  type ChainHealthData,
  type HistoryData,
  HistoryDataSchema,
  RegimeDataSchema,
  type SignalsData,
} from '../../src/services/schemas/market.ts';
import { type ThesisHealthData, ThesisHealthSchema } from '../../src/services/schemas/theses.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { ROOT_DIR } from '../../src/config.ts';

let h: Harness;
let base: string;
const keys: Record<'free' | 'pro' | 'api' | 'other', string> = { free: '', pro: '', api: '', other: '' };
let thesisId = '';
let ipSeq = 0;
const PACKAGE_JSON = JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { version: string };

/** REST call through the real HTTP server (loopback); returns status, headers and JSON. */
async function rest(method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** A connected SDK client, with the API key in `Authorization: Bearer` when given. */
async function connect(key?: string): Promise<Client> {
  const client = new Client({ name: 'mcp-http-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: key ? { headers: { Authorization: `Bearer ${key}` } } : undefined,
  });
  await client.connect(transport);
  return client;
}

/** The `{error}` object of a failed tool result (text content is the REST error as JSON). */
function toolError(r: CallToolResult): { code: string; message: string; details?: Record<string, unknown> } {
  assert.equal(r.isError, true, JSON.stringify(r));
  const first = r.content[0];
  assert.ok(first && first.type === 'text');
  return JSON.parse(first.text).error;
}

/** A new user `sub` (email `<sub>@example.com`) with a key of `tier`, through the harness (POST /api/v1/keys/create). */
async function makeKey(sub: string, tier: 'free' | 'pro' | 'api' = 'free'): Promise<string> {
  return (await h.keyFor(tier, sub)).key;
}

/** Raw JSON-RPC POST to /mcp (for status codes and headers the SDK client hides). */
async function rawMcp(body: unknown, headers: Record<string, string> = {}, query = '') {
  return fetch(`${base}/mcp${query}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...headers,
    },
    body: JSON.stringify(body),
  });
}
const callMsg = (name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: ++ipSeq,
  method: 'tools/call',
  params: { name, arguments: args },
});

before(async () => {
  h = await startHarness({ database: 'pglite' });
  base = h.base;
  keys.free = await makeKey('mcp-free');
  keys.pro = await makeKey('mcp-pro', 'pro');
  keys.api = await makeKey('mcp-api', 'api');
  keys.other = await makeKey('mcp-other', 'api');
  const t = await rest('POST', '/api/v1/thesis', keys.api, {
    asset: 'ETH',
    direction: 'long',
    title: 'ETH recovers',
    entry_price: 3000,
    stop_price: 2500,
    conditions: [{ metric: 'rsi_14', operator: 'lt', value: 30, kind: 'warning' }],
  });
  assert.equal(t.status, 201, JSON.stringify(t.body));
  thesisId = t.body.data.id;
});
after(async () => h?.stop());

describe('MCP over Streamable HTTP with the SDK client', () => {
  test('tools/list returns exactly the six read-only tools with titles, descriptions and schemas', async () => {
    const c = await connect(keys.api);
    const { tools } = await c.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
    for (const t of tools) {
      assert.ok(t.title && t.title.length > 3, `${t.name} title`);
      assert.ok(t.description && t.description.length > 60, `${t.name} description`);
      assert.equal(t.annotations?.readOnlyHint, true, t.name);
      assert.equal(t.inputSchema.type, 'object');
      assert.equal(t.outputSchema?.type, 'object', `${t.name} outputSchema`);
    }
    // Each description ends with the freshness of the data the tool answers from (GET /status).
    for (const t of tools)
      assert.match(
        t.description!,
        /Data freshness: NOT live data: the bundled historical dataset \(offline mode\), which ends on 2025-09-30; judged against that day, .*GET \/api\/v1\/status/,
        t.name,
      );
    const chains = tools.find((t) => t.name === 'get_chain_health')!;
    assert.match(chains.description!, /stale among the series this tool reads: .*metric:eth:tvl \(newest 2025-08-02\)/);
    // Series with no data are named as gaps, not passed over as fresh.
    assert.match(chains.description!, /; \d+ series hold no data \(gaps: .*metric:eth:dex_volume/);
    // The regime's answer lists every asset's signal, and get_assets gives each one's: they read the chain
    // metrics too (ETH's signal is stale by its TVL), so neither says that nothing it reads is stale.
    for (const name of ['get_market_regime', 'get_assets']) {
      const d = tools.find((t) => t.name === name)!.description!;
      assert.doesNotMatch(d, /no series this tool reads is stale/, name);
      assert.match(d, /stale among the series this tool reads: .*metric:eth:tvl \(newest 2025-08-02\)/, name);
    }
    // get_assets says what a stale asset looks like in its answer (null signal; no stale flag), which carries no `stale` field.
    const assetsTool = tools.find((t) => t.name === 'get_assets')!;
    assert.match(
      assetsTool.description!,
      /prices are missing or stale has no current signal \(signal, score and price_usd null, capabilities\.signals false\)/,
    );
    assert.match(assetsTool.description!, /data_to, its newest price day/);
    assert.ok(!('stale' in (assetsTool.outputSchema!.properties!.assets as { items: { properties: object } }).items.properties));
    const hist = tools.find((t) => t.name === 'get_signal_history')!;
    const days = (hist.inputSchema.properties as any).days;
    assert.equal(days.minimum, 1);
    assert.equal(days.maximum, 365);
    assert.equal((hist.inputSchema.properties as any).limit.maximum, 200);
    // get_signals lists exactly the factors the served model returns for an asset with a chain
    // (ETH; it once promised a `trend` factor, which signals-v4 does not weigh).
    const signals = tools.find((t) => t.name === 'get_signals')!;
    const one = (await c.callTool({ name: 'get_signals', arguments: { asset: 'eth', include_factors: true } })) as CallToolResult;
    const names = (one.structuredContent as { factors: { name: string }[] }).factors.map((f) => f.name);
    const listed = /explained breakdown \(([^)]*)\)/.exec(signals.description!)![1]!.split(', ');
    const label = (n: string) =>
      ({ rsi: 'RSI', fear_greed: 'Fear & Greed', funding_rate: 'funding rate', chain_health: 'chain health' })[n] ?? n;
    assert.deepEqual(listed, names.map(label), signals.description);
    await c.close();
  });

  test("get_signal_history's summary says why each change took its level; summaries count in proper English", async () => {
    const c = await connect(keys.api);
    const summaryOf = (r: CallToolResult) => (r.content[0] as { text: string }).text;
    // A year of BTC changes: each line carries its level_rule's reason, in the entries' order.
    const year = (await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin', days: 365 } })) as CallToolResult;
    const data = year.structuredContent as HistoryData;
    assert.ok(data.entries.length > 1, 'BTC changed its signal more than once in the year');
    const lines = summaryOf(year).split('\n');
    assert.equal(lines[0], `${data.entries.length} signal changes of bitcoin from ${data.from} to ${data.to} (365 days, limit 50):`);
    const changes = lines.filter((l) => l.startsWith('- '));
    assert.equal(changes.length, data.entries.length);
    data.entries.forEach((e, i) => {
      assert.ok(e.level_rule, `${e.changed_at} has its level_rule`);
      assert.match(
        changes[i]!,
        new RegExp(
          `^- ${e.changed_at}: .* -> ${e.signal} .*; why: ${e.level_rule.reason} \\(score in the ${e.level_rule.score_level} band`,
        ),
      );
    });
    // The README's example: XRP left strong_buy for neutral on 2024-12-09, held by the volatility gate.
    const xrp = (await c.callTool({
      name: 'get_signal_history',
      arguments: { asset: 'xrp', days: 1, end: '2024-12-09' },
    })) as CallToolResult;
    const rule = (xrp.structuredContent as HistoryData).entries[0]!.level_rule!;
    assert.equal(rule.reason, 'volatility_gate');
    const g = rule.volatility_gate!;
    assert.equal(
      summaryOf(xrp).split('\n').slice(0, 2).join('\n'),
      `1 signal change of ripple from 2024-12-09 to 2024-12-09 (1 day, limit 50):\n- 2024-12-09: strong_buy -> neutral (score ${(xrp.structuredContent as HistoryData).entries[0]!.score.toFixed(2)}, $${(xrp.structuredContent as HistoryData).entries[0]!.price_usd}); why: volatility_gate (score in the ${rule.score_level} band; buys held at neutral: ${g.short_days}-day downside volatility ${g.downside_ratio}x the ${g.long_days}-day, above ${g.max}x)`,
    );
    // The other summaries on one item: singular nouns (the real answers, cut to one).
    const assets = (await c.callTool({ name: 'get_assets', arguments: {} })).structuredContent as AssetsData;
    assert.match(getAssetsTool.summary({ assets: assets.assets.slice(0, 1) }), /^1 supported asset:\n/);
    assert.match(getAssetsTool.summary(assets), new RegExp(`^${assets.assets.length} supported assets:`));
    // An asset without a current signal (prices missing or stale; no stale flag in the answer) says why and how old its prices are.
    const stale = { ...assets.assets[0]!, signal: null, score: null, price_usd: null, data_to: '2025-08-02' };
    assert.equal(
      getAssetsTool.summary({ assets: [stale] }).split('\n')[1],
      `- ${stale.asset} (${stale.symbol}): no current signal (prices missing or stale; newest price day 2025-08-02)${stale.chain ? `, chain ${stale.chain}` : ''}`,
    );
    const signals = (await c.callTool({ name: 'get_signals', arguments: {} })).structuredContent as SignalsData;
    assert.match(getSignalsTool.summary({ ...signals, signals: signals.signals.slice(0, 1) }), /^Signals of 1 asset as of /);
    const none = getSignalHistoryTool.summary({ ...data, days: 1, entries: [], next_end: null });
    assert.match(none, /^0 signal changes of bitcoin from .* \(1 day, limit 50\)\. No change in this window\./);
    const health = (await c.callTool({ name: 'get_thesis_health', arguments: { thesis_id: thesisId } }))
      .structuredContent as ThesisHealthData;
    const horizon = { days: 30, ends_at: '2025-10-01', days_left: 1, passed: false };
    assert.match(getThesisHealthTool.summary({ ...health, horizon }), / Horizon ends 2025-10-01 \(1 day left\)\./);
    assert.match(getThesisHealthTool.summary({ ...health, horizon: { ...horizon, days_left: 2 } }), /\(2 days left\)/);
    const hype = (await c.callTool({ name: 'get_chain_health', arguments: { chain: 'hype' } })).structuredContent as ChainHealthData;
    const oneMetric = getChainHealthTool.summary({ ...hype, components: hype.components.slice(0, 1), missing_metrics: [] });
    assert.match(oneMetric, /from 1 of 1 metric[.;]/);
    await c.close();
  });

  test('every tool: structuredContent equals the REST data for the same question and validates against outputSchema', async () => {
    // The SDK client validates structuredContent against each tool's outputSchema itself
    // (it throws on a mismatch); the zod schemas are checked here as well.
    const c = await connect(keys.api);
    await c.listTools();
    const cases: { tool: string; args: Record<string, unknown>; path: string; schema: { parse(x: unknown): unknown } }[] = [
      { tool: 'get_signals', args: {}, path: '/api/v1/signals', schema: GetSignalsOutput },
      { tool: 'get_signals', args: { include_factors: true }, path: '/api/v1/signals?include_factors=true', schema: GetSignalsOutput },
      {
        tool: 'get_signals',
        args: { asset: 'BTC', include_factors: true },
        path: '/api/v1/signals/BTC?include_factors=true',
        schema: GetSignalsOutput,
      },
      { tool: 'get_market_regime', args: {}, path: '/api/v1/regime', schema: RegimeDataSchema },
      { tool: 'get_chain_health', args: {}, path: '/api/v1/chain-health', schema: GetChainHealthOutput },
      { tool: 'get_chain_health', args: { chain: 'hype' }, path: '/api/v1/chain-health/hype', schema: GetChainHealthOutput },
      { tool: 'get_assets', args: {}, path: '/api/v1/assets', schema: AssetsDataSchema },
      {
        tool: 'get_signal_history',
        args: { asset: 'bitcoin', days: 365, limit: 20 },
        path: '/api/v1/signal-history/bitcoin?days=365&limit=20',
        schema: HistoryDataSchema,
      },
      {
        tool: 'get_signal_history',
        args: { asset: 'bitcoin', days: 365, limit: 20, end: '2022-06-30' },
        path: '/api/v1/signal-history/bitcoin?days=365&limit=20&end=2022-06-30',
        schema: HistoryDataSchema,
      },
      { tool: 'get_thesis_health', args: { thesis_id: thesisId }, path: `/api/v1/thesis/${thesisId}/health`, schema: ThesisHealthSchema },
    ];
    for (const k of cases) {
      const day = new Date().toISOString().slice(0, 10);
      const r = (await c.callTool({ name: k.tool, arguments: k.args })) as CallToolResult;
      assert.notEqual(r.isError, true, `${k.tool}: ${JSON.stringify(r.content)}`);
      const text = r.content[0];
      assert.ok(text && text.type === 'text' && text.text.length > 10, `${k.tool} has a text summary`);
      const restRes = await rest('GET', k.path, keys.api);
      assert.equal(restRes.status, 200, k.path);
      const sc = r.structuredContent as Record<string, unknown>;
      if (k.tool === 'get_thesis_health') {
        // evaluated_at is the wall-clock time of each evaluation; everything else is equal.
        assert.deepEqual({ ...sc, evaluated_at: null }, { ...restRes.body.data, evaluated_at: null });
      } else {
        assert.deepEqual(sc, restRes.body.data, `${k.tool} ${JSON.stringify(k.args)}`);
      }
      k.schema.parse(sc);
      // The same data serialized as a second text block (MCP tools, "Structured Content").
      const json = r.content[1];
      assert.ok(json && json.type === 'text', `${k.tool} has the JSON as text`);
      assert.deepEqual(JSON.parse(json.text), sc);
      // The summary does not hide stale inputs or missing chain metrics, and says how old the data is.
      const summary = (text as { text: string }).text;
      // The day of the call: the day before it or after it (a run may cross midnight UTC).
      const ageLine = (today: string) =>
        `\nData as of 2025-09-30 (the bundled historical dataset (offline mode), not live data): ${Math.round((Date.parse(today) - Date.parse('2025-09-30')) / 86_400_000)} days before today, ${today} UTC.`;
      assert.ok(
        [day, new Date().toISOString().slice(0, 10)].some((d) => summary.endsWith(ageLine(d))),
        `${k.tool}: ${summary.slice(-200)}`,
      );
      const entries = [
        sc,
        ...((sc.chains as Record<string, unknown>[] | undefined) ?? []),
        // get_market_regime's summary is the regime's alone (its signals are get_signals').
        ...((k.tool === 'get_signals' ? (sc.signals as Record<string, unknown>[] | undefined) : undefined) ?? []),
      ];
      // The bundled ETH signal is stale: the list's summary must say so.
      if (k.tool === 'get_signals' && !k.args.asset) assert.match(summary, /ETH .*\(STALE: eth tvl/);
      for (const e of entries) {
        if (e.stale === true) assert.ok(summary.includes(`(STALE: ${String(e.stale_reason)})`), `${k.tool} ${JSON.stringify(k.args)}`);
        for (const m of (e.missing_metrics as { metric: string }[] | undefined) ?? [])
          assert.ok(summary.includes(`${m.metric} (`), m.metric);
      }
    }
    await c.close();
  });

  test('a large answer is compressed when the client accepts it, and decodes to the same JSON', async () => {
    const { gunzipSync } = await import('node:zlib');
    const msg = JSON.stringify(callMsg('get_signals', { include_factors: true }));
    const post = (encoding?: string) =>
      new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const u = new URL(`${base}/mcp`);
        const req = httpRequest(
          {
            host: u.hostname,
            port: u.port,
            path: u.pathname,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': '2025-06-18',
              authorization: `Bearer ${keys.api}`,
              ...(encoding ? { 'accept-encoding': encoding } : {}),
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
          },
        );
        req.on('error', reject);
        req.end(msg);
      });
    const plain = await post();
    const gz = await post('gzip');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.ok(gz.body.length < plain.body.length / 3, `${gz.body.length} of ${plain.body.length} bytes`);
    const a = JSON.parse(plain.body.toString()) as { result: { structuredContent: unknown } };
    const b = JSON.parse(gunzipSync(gz.body).toString()) as { result: { structuredContent: unknown } };
    assert.deepEqual(b.result.structuredContent, a.result.structuredContent);
  });

  test('tool failures are isError results carrying the REST error code', async () => {
    const c = await connect(keys.api);
    assert.equal(toolError((await c.callTool({ name: 'get_signals', arguments: { asset: 'xyz' } })) as CallToolResult).code, 'NOT_FOUND');
    assert.equal(
      toolError((await c.callTool({ name: 'get_chain_health', arguments: { chain: 'btc' } })) as CallToolResult).code,
      'NOT_FOUND',
    );
    // Arguments outside the REST bounds are refused (not clamped) with the REST code, naming the field.
    const bad = toolError((await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin', days: 0 } })) as CallToolResult);
    assert.equal(bad.code, 'INVALID_PARAMETER');
    assert.match(bad.message, /days/);
    // Every out-of-range or non-integer value gets REST's message with the real bounds.
    for (const days of [0, 30.5, 1e308, 9007199254740992]) {
      const e = toolError((await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin', days } })) as CallToolResult);
      assert.equal(e.message, "Invalid argument 'days': must be an integer from 1 to 365", String(days));
    }
    assert.equal(
      toolError((await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin', limit: 201 } })) as CallToolResult).code,
      'INVALID_PARAMETER',
    );
    assert.equal(
      toolError((await c.callTool({ name: 'get_signals', arguments: { include_factors: 'maybe' } })) as CallToolResult).code,
      'INVALID_PARAMETER',
    );
    // A value the service refuses (not the schema) is worded as an argument too, not as REST's
    // query parameter: the same reason, the same details.field.
    const late = toolError(
      (await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin', end: '2025-10-01' } })) as CallToolResult,
    );
    assert.equal(
      late.message,
      "Invalid argument 'end': 2025-10-01 is after the as-of day 2025-09-30; give 2025-09-30 or earlier (or leave it out)",
    );
    assert.deepEqual(late.details, { field: 'end' });
    // A day before the history's epoch is named too, as REST names it.
    const early = toolError(
      (await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin', end: '1900-01-01' } })) as CallToolResult,
    );
    assert.equal(
      early.message,
      "Invalid argument 'end': 1900-01-01 is before 1970-01-01: the stored history starts later; give a later day",
    );
    // A missing required argument says so.
    const missing = toolError((await c.callTool({ name: 'get_signal_history', arguments: {} })) as CallToolResult);
    assert.equal(missing.message, "Invalid argument 'asset': required, expected string");
    // An argument the tool does not take is refused, naming it and the accepted ones (not ignored).
    const unknown = toolError((await c.callTool({ name: 'get_signals', arguments: { as_of: '2024-01-01' } })) as CallToolResult);
    assert.equal(unknown.code, 'INVALID_PARAMETER');
    assert.equal(unknown.message, "Unknown argument 'as_of'; accepted: asset, include_factors");
    assert.deepEqual(unknown.details, { field: 'as_of' });
    const none = toolError((await c.callTool({ name: 'get_market_regime', arguments: { date: 'today' } })) as CallToolResult);
    assert.equal(none.message, "Unknown argument 'date'; this takes no arguments");
    // A lone placeholder `random_string`, which some clients send to argument-less tools, is
    // dropped there: the call answers as without it. Beside another key, or on a tool that
    // takes arguments, it is refused like any undeclared key.
    const plain = (await c.callTool({ name: 'get_market_regime', arguments: {} })) as CallToolResult;
    const placeholder = (await c.callTool({ name: 'get_market_regime', arguments: { random_string: 'dummy' } })) as CallToolResult;
    assert.equal(placeholder.isError, undefined, JSON.stringify(placeholder));
    assert.deepEqual(placeholder.structuredContent, plain.structuredContent);
    const both = toolError((await c.callTool({ name: 'get_assets', arguments: { random_string: 'x', date: 'today' } })) as CallToolResult);
    assert.equal(both.message, "Unknown arguments 'random_string', 'date'; this takes no arguments");
    const withArgs = toolError((await c.callTool({ name: 'get_signals', arguments: { random_string: 'x' } })) as CallToolResult);
    assert.equal(withArgs.message, "Unknown argument 'random_string'; accepted: asset, include_factors");
    const listed = (await c.listTools()).tools.find((t) => t.name === 'get_signals')!;
    assert.equal((listed.inputSchema as { additionalProperties?: unknown }).additionalProperties, false);
    await c.close();
  });

  test('malformed tools/call and tools/list params are -32602 Invalid params naming the field, not -32603', async () => {
    const auth = { authorization: `Bearer ${keys.api}` };
    const cases: [unknown, RegExp][] = [
      [{ name: 'get_signals', arguments: 'nope' }, /Invalid tools\/call params: 'params\.arguments': .*Send \{"name"/],
      [undefined, /Invalid tools\/call params: 'params': .*Send \{"name"/],
      [{ arguments: {} }, /Invalid tools\/call params: 'params\.name': /],
    ];
    for (const [params, message] of cases) {
      const res = await rawMcp({ jsonrpc: '2.0', id: ++ipSeq, method: 'tools/call', ...(params === undefined ? {} : { params }) }, auth);
      assert.equal(res.status, 200);
      const body = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(body.error.code, -32602, JSON.stringify(body));
      assert.match(body.error.message, message);
      assert.ok(!body.error.message.includes('\n'), 'one line, not the raw validation issues');
    }
    const list = await rawMcp({ jsonrpc: '2.0', id: ++ipSeq, method: 'tools/list', params: { cursor: 5 } }, auth);
    const listBody = (await list.json()) as { error: { code: number; message: string } };
    assert.equal(listBody.error.code, -32602);
    assert.match(listBody.error.message, /Invalid tools\/list params: 'params\.cursor': /);
    // Well-formed calls still answer.
    const ok = (await (await rawMcp(callMsg('get_assets'), auth)).json()) as { result: CallToolResult };
    assert.equal(ok.result.isError, undefined);
  });

  test('an unknown method is -32601 naming the method and the methods the server answers, not a bare "Method not found"', async () => {
    for (const method of ['tools/nope', 'resources/list']) {
      const res = await rawMcp({ jsonrpc: '2.0', id: ++ipSeq, method });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { id: number; error: { code: number; message: string } };
      assert.equal(body.id, ipSeq);
      assert.equal(body.error.code, -32601, JSON.stringify(body));
      assert.equal(
        body.error.message,
        `Method not found: "${method}"; this MCP server answers initialize, ping, tools/list, tools/call (tools only: no resources or prompts); call a tool with tools/call {"name": <a tool from tools/list>, "arguments": {...}}`,
      );
    }
    // The list named is the one the server answers: of every request method a client may send
    // (the SDK's ClientRequestSchema, the protocol's list), exactly those are not -32601 (an SDK
    // upgrade that answers one more shows here).
    const auth = { authorization: `Bearer ${await makeKey('mcp-methods', 'api')}` };
    const methods: string[] = ClientRequestSchema.options.map((o) => o.shape.method.value);
    for (const m of MCP_METHODS) assert.ok(methods.includes(m), m);
    const answered: string[] = [];
    for (const method of methods) {
      const body = (await (await rawMcp({ jsonrpc: '2.0', id: ++ipSeq, method }, auth)).json()) as {
        error?: { code: number; message: string };
      };
      if (body.error?.code === -32601) assert.equal(body.error.message, methodNotFoundMessage(method));
      else answered.push(method);
    }
    assert.deepEqual(answered.sort(), [...MCP_METHODS].sort());
    // Each of them answers (not -32601).
    const c = await connect();
    await c.ping();
    assert.ok((await c.listTools()).tools.length > 0);
    await c.close();
  });
});

describe('MCP auth, tiers and limits', () => {
  test('a bad key is HTTP 403 (not a 401 OAuth challenge) with a JSON-RPC error naming it, before any tool runs', async () => {
    const cases: [string, string, RegExp][] = [
      ['svc_live_garbage', 'malformed', /^Invalid API key svc_live_garb\.\.\.: malformed/],
      [`svc_live_${'A'.repeat(38)}`, 'bad_checksum', /^Invalid API key svc_live_AAAA\.\.\.: checksum mismatch/],
      ['not-a-key', 'wrong_credential', /^Invalid API key: API endpoints and MCP take an API key/],
    ];
    for (const [key, reason, message] of cases) {
      const msg = callMsg('get_assets');
      const res = await rawMcp(msg, { authorization: `Bearer ${key}` });
      assert.equal(res.status, 403, key);
      assert.equal(res.headers.get('www-authenticate'), null, 'no challenge: MCP clients would start OAuth');
      const body = (await res.json()) as {
        id: unknown;
        error: { code: number; message: string; data: { code: string; reason: string } };
      };
      // The error answers the request: its id, as the SDK client matches answers to requests.
      assert.equal(body.id, msg.id, key);
      assert.match(body.error.message, message);
      assert.match(body.error.message, /\/signin/);
      assert.deepEqual(body.error.data, { code: 'UNAUTHORIZED', reason });
      if (key.length >= 21) assert.ok(!body.error.message.includes(key.slice(13)), 'only the display prefix of a key is echoed');
    }
    await assert.rejects(connect('svc_live_garbage'), /Invalid API key svc_live_garb/);
    // The id where the body has one usable request id; null where it has none (a notification,
    // a batch, an id that is not an MCP id), or no JSON-RPC request at all.
    const bad = { authorization: 'Bearer svc_live_garbage' };
    const idOf = async (body: unknown) => {
      const res = await rawMcp(body, bad);
      assert.equal(res.status, 403, JSON.stringify(body));
      return ((await res.json()) as { id: unknown }).id;
    };
    assert.equal(await idOf({ jsonrpc: '2.0', id: 'req-7', method: 'tools/list' }), 'req-7');
    assert.equal(await idOf({ jsonrpc: '2.0', method: 'notifications/initialized' }), null);
    assert.equal(await idOf([callMsg('get_assets'), callMsg('get_assets')]), null);
    assert.equal(await idOf({ jsonrpc: '2.0', id: 1.5, method: 'tools/list' }), null);
    assert.equal(await idOf({ jsonrpc: '2.0', id: 3, result: {} }), null);
  });

  test('no OAuth protected-resource metadata: 404 saying to send an API key', async () => {
    for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await fetch(`${base}${p}`);
      assert.equal(res.status, 404, p);
      const body = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'NOT_FOUND');
      assert.match(body.error.message, /does not use OAuth.*Bearer svc_live_/);
    }
  });

  test('without a key tools run as unauthenticated; get_thesis_health needs a key; history needs pro or api', async () => {
    const c = await connect();
    const ok = (await c.callTool({ name: 'get_assets', arguments: {} })) as CallToolResult;
    assert.notEqual(ok.isError, true);
    const noKey = toolError((await c.callTool({ name: 'get_thesis_health', arguments: { thesis_id: thesisId } })) as CallToolResult);
    assert.equal(noKey.code, 'UNAUTHORIZED');
    // REST's theses take a JWT too, MCP does not: the message asks for an API key only.
    assert.match(noKey.message, /^This operation needs an API key: sign in at \/signin/);
    assert.doesNotMatch(noKey.message, /JWT \(bearer token\)/);
    // As REST: no key is UNAUTHORIZED, a key of a lower tier TIER_REQUIRED.
    assert.equal(
      toolError((await c.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin' } })) as CallToolResult).code,
      'UNAUTHORIZED',
    );
    await c.close();

    const free = await connect(keys.free);
    const e = toolError((await free.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin' } })) as CallToolResult);
    assert.equal(e.code, 'TIER_REQUIRED');
    assert.deepEqual(e.details?.required_tiers, ['pro', 'api']);
    await free.close();
    const pro = await connect(keys.pro);
    assert.notEqual(
      ((await pro.callTool({ name: 'get_signal_history', arguments: { asset: 'bitcoin' } })) as CallToolResult).isError,
      true,
    );
    // Another user's thesis is NOT_FOUND (no existence leak).
    assert.equal(
      toolError((await pro.callTool({ name: 'get_thesis_health', arguments: { thesis_id: thesisId } })) as CallToolResult).code,
      'NOT_FOUND',
    );
    await pro.close();
  });

  test('each tools/call counts against the same quota as REST, with rate-limit headers on the HTTP responses', async () => {
    const key = await makeKey('mcp-quota'); // free: 10 per minute
    const auth = { authorization: `Bearer ${key}` };
    // tools/list and initialize are not tool calls: no quota.
    const list = await rawMcp({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, auth);
    assert.equal(list.status, 200);
    assert.equal(list.headers.get('x-ratelimit-remaining'), '50');
    assert.equal(list.headers.get('x-service-tier'), 'free');
    for (let i = 0; i < 4; i++) assert.equal((await rest('GET', '/api/v1/assets', key)).status, 200);
    const remaining: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await rawMcp(callMsg('get_assets'), auth);
      assert.equal(res.status, 200);
      const body = (await res.json()) as any;
      assert.notEqual(body.result.isError, true);
      remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
      assert.ok(res.headers.get('ratelimit-policy'));
    }
    assert.deepEqual(remaining, [45, 44, 43, 42, 41, 40]);
    // The 11th request of the minute (4 REST + 6 MCP before) is refused, over MCP and REST.
    const res = await rawMcp(callMsg('get_assets'), auth);
    const body = (await res.json()) as any;
    const err = JSON.parse(body.result.content[0].text).error;
    assert.equal(body.result.isError, true);
    assert.equal(err.code, 'RATE_LIMITED');
    assert.equal(err.details.window, 'minute');
    assert.ok(Number(res.headers.get('retry-after')) > 0);
    assert.equal((await rest('GET', '/api/v1/assets', key)).status, 429);
    // Refused calls consumed nothing: the daily count stays at 10.
    assert.equal(res.headers.get('x-ratelimit-remaining'), '40');
  });

  test('a tools/call with bad arguments or of an unknown tool counts as one request, as the REST 400 and 404 do; a refused one counts nothing', async () => {
    const key = await makeKey('mcp-bad-args'); // free
    const auth = { authorization: `Bearer ${key}` };
    const remaining = async (msg: unknown) => {
      const res = await rawMcp(msg, auth);
      const body = (await res.json()) as any;
      return { n: Number(res.headers.get('x-ratelimit-remaining')), code: JSON.parse(body.result.content[0].text).error?.code };
    };
    const rest400 = await rest('GET', '/api/v1/signals/btc?include_factors=maybe', key);
    assert.equal(rest400.status, 400);
    const afterRest = Number(rest400.headers.get('x-ratelimit-remaining'));
    const bad = await remaining(callMsg('get_signals', { include_factors: 'maybe' }));
    assert.deepEqual(bad, { n: afterRest - 1, code: 'INVALID_PARAMETER' });
    const unknown = await remaining(callMsg('get_everything'));
    assert.deepEqual(unknown, { n: afterRest - 2, code: 'NOT_FOUND' });
    // A free key may not call get_signal_history: refused first (403, nothing counted), whatever its arguments.
    const refused = await remaining(callMsg('get_signal_history', { asset: 'btc', days: 9999 }));
    assert.deepEqual(refused, { n: afterRest - 2, code: 'TIER_REQUIRED' });
  });

  test('requests other than tools/call are capped per caller without touching the quota', async () => {
    const key = await makeKey('mcp-control');
    const auth = { authorization: `Bearer ${key}` };
    const statuses: number[] = [];
    for (let i = 0; i < 120; i++) statuses.push((await rawMcp({ jsonrpc: '2.0', id: i, method: 'tools/list', params: {} }, auth)).status);
    assert.ok(statuses.every((s) => s === 200));
    const over = await rawMcp({ jsonrpc: '2.0', id: 'over', method: 'tools/list', params: {} }, auth);
    assert.equal(over.status, 429);
    // The error names the request it answers and carries REST's 429 details, for agents that read data.
    const body = (await over.json()) as { id: unknown; error: { code: number; data: Record<string, unknown> } };
    assert.equal(body.id, 'over');
    assert.equal(body.error.code, -32000);
    const { reset, ...data } = body.error.data;
    assert.deepEqual(data, {
      code: 'RATE_LIMITED',
      window: 'minute',
      limit: MCP_CONTROL_REQUESTS_PER_MINUTE,
      retry_after: Number(over.headers.get('retry-after')),
      scope: 'mcp-control',
    });
    assert.ok(Date.parse(String(reset)) > Date.now(), 'reset is a time ahead');
    // tools/call still works: it counts against the API quota, which is untouched.
    const res = await rawMcp(callMsg('get_assets'), auth);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-remaining'), '49');
  });

  test('a tools/call that never reaches a tool (a notification, malformed params) counts against the cap, not for free', async () => {
    const auth = { authorization: `Bearer ${await makeKey('mcp-control-bypass')}` };
    const notification = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'get_assets' } };
    const malformed = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 5 } });
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) statuses.push((await rawMcp(notification, auth)).status);
    for (let i = 0; i < 60; i++) statuses.push((await rawMcp(malformed(i), auth)).status);
    assert.deepEqual(
      [statuses.slice(0, 60).every((s) => s === 202), statuses.slice(60).every((s) => s === 200)],
      [true, true],
      'answered while under the cap',
    );
    assert.equal((await rawMcp(notification, auth)).status, 429, 'the 121st such message is over the cap');
    assert.equal((await rawMcp(malformed(999), auth)).status, 429);
    // A well-formed call still reaches its tool (metered against the API quota instead).
    assert.equal((await rawMcp(callMsg('get_assets'), auth)).status, 200);
  });

  test('the cap scales with the tier: an api key may connect for each of its 500 calls a minute', async () => {
    assert.deepEqual((['unauthenticated', 'free', 'pro', 'api'] as const).map(mcpControlCap), [
      MCP_CONTROL_REQUESTS_PER_MINUTE,
      MCP_CONTROL_REQUESTS_PER_MINUTE,
      300,
      1500,
    ]);
    const auth = { authorization: `Bearer ${await makeKey('mcp-control-api', 'api')}` };
    const list = (n: number, from: number) => Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: from + i, method: 'tools/list' }));
    // 1,500 messages other than tools/call in batches of 50 (3 per call of the tier's 500 a minute)...
    for (let b = 0; b < 30; b++) assert.equal((await rawMcp(list(50, b * 50), auth)).status, 200, `batch ${b}`);
    // ...then the cap, which names the tier's figure.
    const over = await rawMcp(list(1, 1500), auth);
    assert.equal(over.status, 429);
    assert.match(((await over.json()) as { error: { message: string } }).error.message, /at most 1500 per minute on the api tier/);
  });

  test('a batch counts each of its messages against the cap, and holds at most MCP_MAX_BATCH', async () => {
    const auth = { authorization: `Bearer ${await makeKey('mcp-batch')}` };
    const list = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: from + i, method: 'tools/list' }));
    const first = await rawMcp(list(50), auth);
    assert.equal(first.status, 200);
    assert.equal(((await first.json()) as unknown[]).length, 50);
    assert.equal((await rawMcp(list(50, 50), auth)).status, 200);
    // 100 of 120 used: a batch of 21 does not fit, and counts nothing; one of 20 does.
    const over = await rawMcp(list(21, 100), auth);
    assert.equal(over.status, 429);
    assert.match(
      ((await over.json()) as { error: { message: string } }).error.message,
      /each message of a batch counted; retry in \d+ s \(a client that stays connected/,
    );
    assert.equal((await rawMcp(list(20, 100), auth)).status, 200);
    assert.equal((await rawMcp(list(1, 120), auth)).status, 429);
    const big = await rawMcp(list(MCP_MAX_BATCH + 1), { authorization: `Bearer ${await makeKey('mcp-big-batch')}` });
    assert.equal(big.status, 400);
    const bigBody = (await big.json()) as { error: { code: number; message: string } };
    assert.equal(bigBody.error.code, -32600);
    assert.match(bigBody.error.message, new RegExp(`at most ${MCP_MAX_BATCH} messages \\(this one holds ${MCP_MAX_BATCH + 1}\\)`));
    // An empty batch is one Invalid Request error (JSON-RPC 2.0), not an empty 202.
    const empty = await rawMcp([], { authorization: `Bearer ${await makeKey('mcp-empty-batch')}` });
    assert.equal(empty.status, 400);
    const emptyBody = (await empty.json()) as { id: unknown; error: { code: number; message: string } };
    assert.equal(emptyBody.error.code, -32600);
    assert.equal(emptyBody.id, null);
    assert.match(emptyBody.error.message, /^Invalid Request: the batch is empty/);
    // Valid JSON that is not a JSON-RPC message is an Invalid Request (-32600), not a Parse error.
    const anyKey = { authorization: `Bearer ${await makeKey('mcp-invalid-envelope')}` };
    for (const [body, id, why] of [
      [{ id: 8, method: 'ping' }, 8, /"jsonrpc" must be "2.0"/],
      [42, null, /a message must be a JSON object/],
      [[{ jsonrpc: '2.0', id: 1, method: 'ping' }, 5], null, /a message must be a JSON object/],
      [{ jsonrpc: '2.0', id: 3, method: 7 }, 3, /"method" must be a string/],
      [{ jsonrpc: '2.0', id: 4 }, 4, /needs a "method"/],
      [{ jsonrpc: '2.0', id: { x: 1 }, method: 'ping' }, null, /"id" must be a string or an integer/],
      [{ jsonrpc: '2.0', id: 1.5, method: 'ping' }, null, /"id" must be a string or an integer/],
      [{ jsonrpc: '2.0', id: 1e300, method: 'ping' }, null, /"id" must be a string or an integer/],
      [{ jsonrpc: '2.0', id: 10, method: 'ping', foo: 1 }, 10, /unknown member "foo" .*put request data in "params"/],
      [{ jsonrpc: '2.0', id: 12, method: 'tools/call', params: { name: 'get_assets' }, meta: {} }, 12, /unknown member "meta"/],
      [{ jsonrpc: '2.0', id: 13, result: {}, error: { code: 1, message: 'x' } }, 13, /not both/],
      [{ jsonrpc: '2.0', id: 6, method: 'ping', params: null }, 6, /"params" must be an object/],
      [{ jsonrpc: '2.0', id: 7, method: 'ping', params: 'x' }, 7, /"params" must be an object/],
      [{ jsonrpc: '2.0', id: 9, method: 'ping', params: [1] }, 9, /"params" must be an object \(MCP takes named params\)/],
    ] as const) {
      const res = await rawMcp(body, anyKey);
      assert.equal(res.status, 400, JSON.stringify(body));
      const b = (await res.json()) as { id: unknown; error: { code: number; message: string } };
      assert.equal(b.error.code, -32600, JSON.stringify(body));
      assert.equal(b.id, id);
      assert.match(b.error.message, why);
    }
    // A batch is answered with an array, also when it holds one request.
    const one = await rawMcp([{ jsonrpc: '2.0', id: 11, method: 'ping' }], anyKey);
    assert.equal(one.status, 200);
    assert.deepEqual(await one.json(), [{ jsonrpc: '2.0', id: 11, result: {} }]);
  });

  test('a batch with two requests under one id is refused before any runs: nothing counted against the quota', async () => {
    const key = await makeKey('mcp-batch-ids');
    const auth = { authorization: `Bearer ${key}` };
    const before = Number((await rawMcp(callMsg('get_assets'), auth)).headers.get('x-ratelimit-remaining'));
    const res = await rawMcp(
      [
        { ...callMsg('get_assets'), id: 7 },
        { ...callMsg('get_signals'), id: 7 },
      ],
      auth,
    );
    assert.equal(res.status, 400);
    const b = (await res.json()) as { error: { code: number; message: string } };
    assert.equal(b.error.code, -32600);
    assert.match(b.error.message, /more than one request with the id 7; give each request of a batch its own id/);
    // The next call is the only one counted after `before`.
    assert.equal(Number((await rawMcp(callMsg('get_assets'), auth)).headers.get('x-ratelimit-remaining')), before - 1);
    // Distinct ids: both answered, in an array, both counted.
    const both = await rawMcp(
      [
        { ...callMsg('get_assets'), id: 1 },
        { ...callMsg('get_assets'), id: 2 },
      ],
      auth,
    );
    assert.deepEqual(((await both.json()) as { id: number }[]).map((r) => r.id).sort(), [1, 2]);
    assert.equal(Number(both.headers.get('x-ratelimit-remaining')), before - 3);
  });

  test('initialize with missing or mistyped params is -32602 naming the field, not -32603', async () => {
    const auth = { authorization: `Bearer ${keys.api}` };
    for (const params of [undefined, {}, { protocolVersion: 5, capabilities: {}, clientInfo: { name: 'x', version: '1' } }]) {
      const res = await rawMcp({ jsonrpc: '2.0', id: 9, method: 'initialize', ...(params === undefined ? {} : { params }) }, auth);
      const body = (await res.json()) as { id: number; error: { code: number; message: string } };
      assert.equal(body.error.code, -32602, JSON.stringify(body));
      assert.equal(body.id, 9);
      // The message itself, without the "MCP error -32602: " that SDK clients put before it.
      assert.match(body.error.message, /^Invalid initialize params: 'params(\.protocolVersion)?': .*Send \{"protocolVersion"/);
    }
    const ok = await rawMcp(
      {
        jsonrpc: '2.0',
        id: 10,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      },
      auth,
    );
    const okBody = (await ok.json()) as { result: { serverInfo: { name: string; version: string } } };
    assert.equal(okBody.result.serverInfo.name, 'market-intel');
    // The version is the package's, not a constant of its own.
    assert.equal(okBody.result.serverInfo.version, PACKAGE_JSON.version);
  });

  test('Host and Origin are validated (DNS rebinding) and tokens in the query string are refused', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    const evil = await rawMcp(init, { origin: 'http://evil.example' });
    assert.equal(evil.status, 403);
    // The refusal says what is accepted and which setting adds a host, as the Host refusal does.
    assert.equal(
      ((await evil.json()) as { error: { message: string } }).error.message,
      "Origin 'http://evil.example' is not allowed (DNS-rebinding protection); accepted: loopback, PUBLIC_URL's host and the hosts in MCP_ALLOWED_HOSTS (the operator adds one there)",
    );
    assert.equal((await rawMcp(init, { origin: 'null' })).status, 403);
    assert.equal((await rawMcp(init, { origin: base })).status, 200);
    const badHost = await new Promise<number>((resolve, reject) => {
      // fetch does not let a caller set Host; use node:http for a rebinding-style Host header.
      import('node:http').then(({ request }) => {
        const u = new URL(`${base}/mcp`);
        const req = request(
          {
            host: u.hostname,
            port: u.port,
            path: '/mcp',
            method: 'POST',
            headers: { host: 'attacker.example:80', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(init));
      }, reject);
    });
    assert.equal(badHost, 403);
    assert.equal((await rawMcp(init, {}, `?access_token=${keys.free}`)).status, 400);
    assert.equal((await rawMcp(init, {}, `?api_key=${keys.free}`)).status, 400);
    const headerKey = await rawMcp(init, { 'x-api-key': keys.free });
    assert.equal(headerKey.status, 400);
    const refusal = (await headerKey.json()) as { error: { code: number; message: string } };
    assert.equal(refusal.error.message, 'The x-api-key header is not read: send the API key as Authorization: Bearer <key>');
  });

  test('a body Fastify refuses gets a JSON-RPC error, not the REST envelope: parse error, media type, size', async () => {
    const post = async (contentType: string, body: string) => {
      const r = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { 'content-type': contentType, accept: 'application/json, text/event-stream', authorization: `Bearer ${keys.free}` },
        body,
      });
      return { status: r.status, body: (await r.json()) as { jsonrpc: string; error: { code: number; message: string }; id: null } };
    };
    const parse = await post('application/json', '{"jsonrpc":"2.0","id":1,');
    assert.equal(parse.status, 400);
    assert.deepEqual([parse.body.jsonrpc, parse.body.error.code, parse.body.id], ['2.0', -32700, null]);
    const media = await post('text/plain', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    assert.equal(media.status, 415);
    assert.match(media.body.error.message, /Content-Type: application\/json/);
    const big = await post('application/json', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', pad: 'x'.repeat(1_100_000) }));
    assert.equal(big.status, 413);
    assert.match(big.body.error.message, /at most \d+ bytes/);
  });
});

describe('MCP over HTTP: refusals of methods and of addresses over the failed-auth budget', () => {
  let hh: Harness;
  before(async () => {
    // Its own service: the failed-auth budget is per address, and TRUST_PROXY lets each test
    // speak from its own (X-Forwarded-For) without using up the main suite's.
    hh = await startHarness({ database: 'pglite', config: { TRUST_PROXY: '127.0.0.1' } });
  });
  after(async () => hh?.stop());

  test('every method but POST (and the CORS preflight) is 405 with Allow: POST and a JSON-RPC error', async () => {
    for (const method of ['GET', 'DELETE', 'PUT', 'PATCH']) {
      const res = await fetch(`${hh.base}/mcp`, { method, headers: { accept: 'application/json, text/event-stream' } });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get('allow'), 'POST', method);
      const body = (await res.json()) as { jsonrpc: string; error: { code: number; message: string } };
      assert.equal(body.jsonrpc, '2.0', method);
      assert.match(body.error.message, /stateless; use POST/, method);
    }
  });

  test('an OPTIONS that is not a CORS preflight (no Origin, curl -X OPTIONS) is 204 with Allow; under /mcp/ a 404', async () => {
    for (const headers of [{}, { origin: hh.base }] as Record<string, string>[]) {
      const res = await fetch(`${hh.base}/mcp`, { method: 'OPTIONS', headers });
      assert.equal(res.status, 204, `${JSON.stringify(headers)}: ${await res.text()}`);
      assert.equal(res.headers.get('allow'), 'OPTIONS, POST');
    }
    const other = await fetch(`${hh.base}/mcp/nope`, { method: 'OPTIONS' });
    assert.equal(other.status, 404);
    assert.equal(((await other.json()) as { error: { code: string } }).error.code, 'NOT_FOUND');
  });

  test('an address over its failed-auth budget gets 429 with REST details in the JSON-RPC error data', async () => {
    const from = '10.7.0.1';
    const post = (key: string) =>
      fetch(`${hh.base}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${key}`,
          'x-forwarded-for': from,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
    const bogus = `svc_live_${'x'.repeat(38)}`;
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) assert.equal((await post(bogus)).status, 403);
    const res = await post(bogus);
    assert.equal(res.status, 429);
    const body = (await res.json()) as { id: unknown; error: { message: string; data: Record<string, unknown> } };
    assert.equal(body.id, 1, 'answered with the request id');
    assert.match(body.error.message, /Too many failed authentication attempts from this address/);
    assert.equal(body.error.data.code, 'RATE_LIMITED');
    assert.equal(body.error.data.limit, AUTH_FAILURES_PER_MINUTE);
    assert.equal(body.error.data.window, 'minute');
    assert.equal(body.error.data.retry_after, Number(res.headers.get('retry-after')));
  });
});
