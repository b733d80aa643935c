import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.ts';
import { runTool, type ToolDefinition } from '../../src/mcp/tool.ts';
import { TOOLS } from '../../src/mcp/tools/index.ts';
import { createService, type Service } from '../../src/server.ts';
import { AUTH_FAILURES_PER_MINUTE, PUBLIC_UNMETERED } from '../../src/services/access.ts';
import type { Operation } from '../../src/services/operation.ts';
import { OPERATIONS } from '../../src/services/operations/index.ts';
import { testConfig } from '../helpers/env.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';

/**
 * Each operation's access policy is declared once (services/operations) and enforced by one
 * module (services/access.ts): for the same caller, every operation has the same outcome
 * (allowed, 401, 403, 429) through REST (the Fastify guard) and through MCP (the transport's
 * authentication, then the tool runner with the operation's policy).
 */

let idp: TestIdp;
let svc: Service;
let thesisId = '';
let ipSeq = 0;
const nextIp = () => `10.77.${Math.floor(++ipSeq / 250)}.${(ipSeq % 250) + 1}`;

/** How REST asks each operation (path, method, body) and what MCP passes as its input. */
function restCall(op: Operation): { method: 'GET' | 'POST' | 'DELETE'; url: string; body?: unknown; input: unknown } {
  const missing = randomUUID();
  const calls: Record<string, { method: 'GET' | 'POST' | 'DELETE'; url: string; body?: unknown; input: unknown }> = {
    listSignals: { method: 'GET', url: '/api/v1/signals', input: { include_factors: false } },
    getSignal: { method: 'GET', url: '/api/v1/signals/btc', input: { asset: 'btc', include_factors: false } },
    getRegime: { method: 'GET', url: '/api/v1/regime', input: {} },
    listChainHealth: { method: 'GET', url: '/api/v1/chain-health', input: {} },
    getChainHealth: { method: 'GET', url: '/api/v1/chain-health/eth', input: { chain: 'eth' } },
    getChainMetrics: { method: 'GET', url: '/api/v1/chain-metrics/eth', input: { chain: 'eth' } },
    listAssets: { method: 'GET', url: '/api/v1/assets', input: {} },
    getSignalHistory: { method: 'GET', url: '/api/v1/signal-history/bitcoin', input: { asset: 'bitcoin', days: 30, limit: 5 } },
    getStatus: { method: 'GET', url: '/api/v1/status', input: {} },
    getPrices: { method: 'GET', url: '/api/v1/prices/btc?days=30', input: { asset: 'btc', days: 30 } },
    getTrackRecord: { method: 'GET', url: '/api/v1/track-record', input: {} },
    createKey: { method: 'POST', url: '/api/v1/keys/create', body: { name: 'p' }, input: { name: 'p' } },
    listKeys: { method: 'GET', url: '/api/v1/keys', input: {} },
    revokeKey: { method: 'POST', url: '/api/v1/keys/revoke', body: { key_id: missing }, input: { key_id: missing } },
    createThesis: {
      method: 'POST',
      url: '/api/v1/thesis',
      body: { asset: 'btc', direction: 'long', title: 'policy' },
      input: { asset: 'btc', direction: 'long', title: 'policy', conditions: [] },
    },
    listTheses: { method: 'GET', url: '/api/v1/thesis', input: {} },
    getThesis: { method: 'GET', url: `/api/v1/thesis/${thesisId}`, input: { id: thesisId } },
    deleteThesis: { method: 'DELETE', url: `/api/v1/thesis/${missing}`, input: { id: missing } },
    getThesisHealth: { method: 'GET', url: `/api/v1/thesis/${thesisId}/health`, input: { id: thesisId } },
  };
  const c = calls[op.name];
  assert.ok(c, `no REST call for operation ${op.name}: add it here`);
  return c;
}

/** allowed (the operation ran: 2xx, or 404 for something that is not the caller's), or the refusal status. */
type Outcome = 'allowed' | 401 | 403 | 429 | number;
const outcome = (status: number): Outcome => (status < 300 || status === 404 ? 'allowed' : status);

async function viaRest(op: Operation, header: string | undefined, ip: string): Promise<Outcome> {
  const c = restCall(op);
  const res = await svc.app.inject({
    method: c.method,
    url: c.url,
    remoteAddress: ip,
    headers: { ...(header ? { authorization: header } : {}), ...(c.body ? { 'content-type': 'application/json' } : {}) },
    ...(c.body ? { payload: JSON.stringify(c.body) } : {}),
  });
  return outcome(res.statusCode);
}

/** MCP's path: the transport identifies the caller (API key or none), the tool runner authorizes and meters with the operation's policy. */
async function viaMcp(op: Operation, header: string | undefined, ip: string): Promise<Outcome> {
  const auth = await svc.access.authenticate(header, PUBLIC_UNMETERED, ip);
  if (!auth.ok) return outcome(auth.error.status);
  // A tool over exactly this operation (the six real tools are such adapters; the equality of
  // their answers with REST is shown in test/mcp/mcp-http.test.ts).
  const tool: ToolDefinition = {
    name: 'get_assets',
    title: op.name,
    description: op.name,
    input: z.object({}).passthrough(),
    output: z.object({}),
    route: () => ({ op, input: restCall(op).input }),
    summary: () => op.name,
  };
  const r: CallToolResult = await runTool({ services: svc, access: svc.access, caller: auth.caller }, tool, {});
  if (!r.isError) return 'allowed';
  const code = JSON.parse((r.content[0] as { text: string }).text).error.code as ErrorCode;
  return outcome(ERROR_STATUS[code]);
}

async function newKey(sub: string, tier?: 'pro' | 'api'): Promise<string> {
  const jwt = await idp.token(sub, { email: `${sub}@example.com` });
  const r = await svc.app.inject({
    method: 'POST',
    url: '/api/v1/keys/create',
    headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
    payload: '{}',
  });
  assert.equal(r.statusCode, 201, r.body);
  if (tier) await svc.keys.setTier(`${sub}@example.com`, tier);
  return r.json().data.key;
}

before(async () => {
  idp = await startTestIdp();
  svc = await createService(testConfig({ AUTH_ISSUER: idp.issuer }));
  await svc.app.ready();
  const owner = await newKey('policy-owner', 'pro');
  const t = await svc.app.inject({
    method: 'POST',
    url: '/api/v1/thesis',
    headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ asset: 'eth', direction: 'long', title: 'owned' }),
  });
  assert.equal(t.statusCode, 201, t.body);
  thesisId = t.json().data.id;
});
after(async () => {
  await svc?.stop();
  await idp?.close();
});

/** Operations no MCP tool wraps (REST only): key management, the thesis objects, chain metrics, prices, status. */
const REST_ONLY = [
  'getChainMetrics',
  'getPrices',
  'getStatus',
  'getTrackRecord',
  'createKey',
  'listKeys',
  'revokeKey',
  'createThesis',
  'listTheses',
  'getThesis',
  'deleteThesis',
];

test('every operation has a REST call and a policy; the six MCP tools wrap operations; the others are REST only', () => {
  assert.equal(OPERATIONS.length, 19);
  assert.equal(TOOLS.length, 6);
  for (const op of OPERATIONS) {
    restCall(op);
    assert.ok(['public', 'api-key', 'api-key-or-user', 'user'].includes(op.policy.name), op.name);
  }
  const ops = new Set(OPERATIONS);
  const wrapped = new Set<Operation>();
  for (const tool of TOOLS) {
    // A tool may pick one of two operations by its arguments (e.g. get_signals with or without `asset`).
    // (Tools refuse arguments they do not declare: each gets only its own of these.)
    const policies = new Set<string>();
    for (const all of [{}, { asset: 'btc', chain: 'eth', thesis_id: 'x' }]) {
      const args = Object.fromEntries(Object.entries(all).filter(([k]) => k in tool.input.shape));
      const parsed = tool.input.safeParse(args);
      if (!parsed.success) continue;
      const op = tool.route(parsed.data).op;
      assert.ok(ops.has(op), tool.name);
      wrapped.add(op);
      policies.add(JSON.stringify(op.policy));
    }
    // Every route of a tool has one policy, the one a call with bad arguments is admitted with
    // (runTool: the argument-free route's).
    policies.add(JSON.stringify(tool.route({} as never).op.policy));
    assert.equal(policies.size, 1, `${tool.name}: ${[...policies].join(' / ')}`);
  }
  const restOnly = OPERATIONS.filter((op) => !wrapped.has(op)).map((op) => op.name);
  assert.deepEqual(restOnly.sort(), [...REST_ONLY].sort());
});

test('same caller, same outcome through REST and MCP, for every operation', async () => {
  const callers: { name: string; header: () => Promise<string | undefined>; fresh: boolean }[] = [
    { name: 'anonymous', header: async () => undefined, fresh: true },
    { name: 'malformed key', header: async () => 'Bearer svc_live_garbage', fresh: true },
    { name: 'unknown key', header: async () => `Bearer svc_live_${'A'.repeat(38)}`, fresh: true },
    { name: 'free key', header: async () => `Bearer ${await newKey(`free-${randomUUID()}`)}`, fresh: true },
    { name: 'pro key', header: async () => `Bearer ${await newKey(`pro-${randomUUID()}`, 'pro')}`, fresh: true },
    { name: 'api key', header: async () => `Bearer ${await newKey(`api-${randomUUID()}`, 'api')}`, fresh: true },
  ];
  const seen = new Map<string, Set<Outcome>>();
  const rows: string[] = [];
  for (const op of OPERATIONS) {
    for (const c of callers) {
      // A fresh credential and address per operation, so quotas of one row do not leak into the next.
      const header = await c.header();
      const ip = nextIp();
      const rest = await viaRest(op, header, ip);
      const mcp = await viaMcp(op, header, ip);
      rows.push(`${op.name.padEnd(16)} ${c.name.padEnd(14)} REST ${rest} MCP ${mcp}`);
      assert.equal(mcp, rest, `${op.name} for ${c.name}: REST ${rest}, MCP ${mcp}`);
      const s = seen.get(op.policy.name) ?? new Set();
      s.add(rest);
      seen.set(op.policy.name, s);
    }
  }
  // The table covers allowed, 401 and 403 (429 below).
  const all = new Set([...seen.values()].flatMap((s) => [...s]));
  for (const o of ['allowed', 401, 403] as Outcome[]) assert.ok(all.has(o), `outcome ${o} never occurred:\n${rows.join('\n')}`);
});

test('a caller over its quota gets 429 through both, for every operation it may call', async () => {
  const header = `Bearer ${await newKey(`quota-${randomUUID()}`)}`; // free: 10 per minute
  const ip = nextIp();
  for (let i = 0; i < 10; i++)
    assert.equal(
      await viaRest(
        OPERATIONS.find((o) => o.name === 'listAssets')!,
        header,
        ip,
      ),
      'allowed',
    );
  const anonIp = nextIp();
  for (let i = 0; i < 5; i++)
    assert.equal(
      await viaRest(
        OPERATIONS.find((o) => o.name === 'listAssets')!,
        undefined,
        anonIp,
      ),
      'allowed',
    );
  for (const op of OPERATIONS) {
    const unmetered = op.policy.quota === 'none';
    const expected: Outcome =
      op.policy.name === 'user' || (op.policy.tiers && !op.policy.tiers.includes('free'))
        ? op.policy.name === 'user'
          ? 401
          : 403
        : unmetered
          ? 'allowed'
          : 429;
    assert.equal(await viaRest(op, header, ip), expected, `REST ${op.name}`);
    assert.equal(await viaMcp(op, header, ip), expected, `MCP ${op.name}`);
    const anonExpected: Outcome = op.policy.name === 'public' ? (unmetered ? 'allowed' : 429) : 401;
    assert.equal(await viaRest(op, undefined, anonIp), anonExpected, `REST anonymous ${op.name}`);
    assert.equal(await viaMcp(op, undefined, anonIp), anonExpected, `MCP anonymous ${op.name}`);
  }
});

test('anonymous calls of a key-only operation count as failed authentications through both, and 429 once the address used its budget', async () => {
  const history = OPERATIONS.find((o) => o.name === 'getSignalHistory')!;
  // Through MCP alone: the address's budget runs out, then REST from it is refused too.
  const ip = nextIp();
  for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) assert.equal(await viaMcp(history, undefined, ip), 401, `MCP call ${i + 1}`);
  assert.equal(await viaMcp(history, undefined, ip), 429);
  assert.equal(await viaRest(history, undefined, ip), 429);
  // And the other way round: REST uses it up, MCP is refused.
  const ip2 = nextIp();
  for (let i = 0; i < AUTH_FAILURES_PER_MINUTE; i++) assert.equal(await viaRest(history, undefined, ip2), 401, `REST call ${i + 1}`);
  assert.equal(await viaRest(history, undefined, ip2), 429);
  assert.equal(await viaMcp(history, undefined, ip2), 429);
  // A public operation stays open to the same address without a key (nothing failed there).
  assert.equal(
    await viaMcp(
      OPERATIONS.find((o) => o.name === 'listAssets')!,
      undefined,
      ip,
    ),
    'allowed',
  );
  assert.equal(
    await viaRest(
      OPERATIONS.find((o) => o.name === 'listAssets')!,
      undefined,
      ip,
    ),
    'allowed',
  );
});
