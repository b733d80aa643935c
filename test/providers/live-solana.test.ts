import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLiveSources, type LiveSource } from '../../src/providers/live/index.ts';
import { fixture, startFixtureServer, type Logged, type Reply } from '../helpers/fixture-server.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const at = (iso: string) => Date.parse(iso);

describe('Solana RPC transactions (documented responses)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  let route: (r: Logged) => Reply = () => ({ status: 500 });
  before(async () => {
    srv = await startFixtureServer((r) => route(r));
  });
  after(() => srv.close());
  const sol = () =>
    createLiveSources({ baseUrls: { solanaRpc: srv.url }, retryMinTimeoutMs: 10 }).find((s) => s.series === 'metric:sol:transactions')!;

  test('the documented responses parse; two minutes of samples complete no day', async () => {
    route = (r) => ({
      body: fixture(
        (r.body as { method: string }).method === 'getBlockTime'
          ? 'solana/getBlockTime.documented.json'
          : 'solana/getRecentPerformanceSamples.documented.json',
      ),
    });
    srv.log.length = 0;
    const got = await sol().fetch('2019-11-01', '2019-12-01');
    assert.deepStrictEqual(got, { kind: 'metric', points: [], source: sol().source });
    assert.deepStrictEqual(
      srv.log.map((l) => l.body),
      [
        { jsonrpc: '2.0', id: 1, method: 'getRecentPerformanceSamples', params: [720] },
        { jsonrpc: '2.0', id: 1, method: 'getBlockTime', params: [348125] },
      ],
    );
  });

  test('a changed field is named; an RPC error is an error; no block time is an error', async () => {
    route = () => ({ body: { jsonrpc: '2.0', result: [{ slot: 1, numTransactions: '126', numSlots: 1, samplePeriodSecs: 60 }], id: 1 } });
    await assert.rejects(
      sol().fetch('2019-11-01', '2019-12-01'),
      /getRecentPerformanceSamples|unexpected response format at field result\[0\]\.numTransactions/,
    );
    route = () => ({ body: { jsonrpc: '2.0', error: { code: -32005, message: 'Node is behind' }, id: 1 } });
    await assert.rejects(sol().fetch('2019-11-01', '2019-12-01'), /RPC error -32005 Node is behind/);
    route = (r) => ({
      body:
        (r.body as { method: string }).method === 'getBlockTime'
          ? { jsonrpc: '2.0', result: null, id: 1 }
          : JSON.parse(fixture('solana/getRecentPerformanceSamples.documented.json')),
    });
    await assert.rejects(sol().fetch('2019-11-01', '2019-12-01'), /getBlockTime: .*no time for slot 348125/);
  });

  test('a hole in the node samples (slots not contiguous) leaves the day incomplete', async () => {
    // One sample per minute, 150 slots each; slot s ends at `epoch + s * 400 ms`.
    const epoch = at('2025-06-01T00:00:00Z');
    let now = 0;
    let hole = -1;
    route = (r) => {
      const b = r.body as { method: string; params: number[] };
      if (b.method === 'getBlockTime') return { body: { jsonrpc: '2.0', result: Math.floor((epoch + b.params[0]! * 400) / 1000), id: 1 } };
      const result = [];
      for (let k = 0; k < 720; k++) {
        const end = now - k * 60_000;
        if (end === hole) continue;
        result.push({ slot: (end - epoch) / 400, numTransactions: 1000, numSlots: 150, samplePeriodSecs: 60, numNonVoteTransactions: 100 });
      }
      return { body: { jsonrpc: '2.0', result, id: 1 } };
    };
    const poll = async (s: LiveSource, iso: string) => {
      now = at(iso);
      return s.fetch('2025-06-01', '2025-06-05');
    };
    const whole = sol();
    await poll(whole, '2025-06-02T00:00:00Z');
    await poll(whole, '2025-06-02T12:00:00Z');
    assert.deepStrictEqual((await poll(whole, '2025-06-03T00:00:00Z')).points, [{ date: '2025-06-02', value: 1440 * 1000 }]);

    const holed = sol();
    await poll(holed, '2025-06-02T00:00:00Z');
    await poll(holed, '2025-06-02T12:00:00Z');
    hole = at('2025-06-02T18:00:00Z');
    assert.deepStrictEqual((await poll(holed, '2025-06-03T00:00:00Z')).points, [], 'samples before the hole cannot be placed in time');
  });
});

describe('Solana accumulation against the fake upstream', () => {
  let up: Upstream;
  before(async () => {
    up = await startUpstream();
    up.setToday('2025-06-04');
  });
  after(() => up.close());
  const sol = () => createLiveSources({ baseUrls: up.baseUrls }).find((s) => s.series === 'metric:sol:transactions')!;
  const poll = (s: LiveSource, iso: string) => {
    up.setNow(at(iso));
    return s.fetch('2025-05-31', '2025-06-04');
  };

  test('a day is returned only once samples cover it from 00:00 to 24:00, with the bundled total', async () => {
    const s = sol();
    assert.deepStrictEqual((await poll(s, '2025-06-01T00:00:00Z')).points, []);
    assert.deepStrictEqual((await poll(s, '2025-06-01T12:00:00Z')).points, [], 'half a day is not a day');
    assert.deepStrictEqual((await poll(s, '2025-06-01T23:00:00Z')).points, []);
    assert.deepStrictEqual((await poll(s, '2025-06-02T00:00:00Z')).points, [{ date: '2025-06-01', value: 349518919 }]);
  });

  test('a poll gap longer than the node window (12 h) leaves that day incomplete, for good', async () => {
    const s = sol();
    await poll(s, '2025-06-01T00:00:00Z');
    await poll(s, '2025-06-01T11:00:00Z');
    // next poll 13 h later: 11:00..11:00+1h is never covered
    await poll(s, '2025-06-02T00:00:00Z');
    await poll(s, '2025-06-02T12:00:00Z');
    assert.deepStrictEqual(
      (await poll(s, '2025-06-03T00:00:00Z')).points,
      [{ date: '2025-06-02', value: 352468434 }],
      '2025-06-01 is never returned',
    );
  });

  test('a restart (a new source) cannot complete the day it started in', async () => {
    const s = sol();
    await poll(s, '2025-06-02T13:00:00Z');
    assert.deepStrictEqual((await poll(s, '2025-06-03T00:00:00Z')).points, []);
  });
});
