import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLiveSources } from '../../src/providers/live/index.ts';
import { fixture, fixtureJson, startFixtureServer } from '../helpers/fixture-server.ts';

describe('alternative.me Fear & Greed (recorded responses)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    srv = await startFixtureServer(() => ({ body: fixture('alternative_me/fng_limit30.reconstructed.json') }));
  });
  after(() => srv.close());
  const fng = () =>
    createLiveSources({ baseUrls: { alternativeMe: srv.url }, retryMinTimeoutMs: 10 }).find((s) => s.series === 'fear_greed')!;

  test('normal parse: newest-first strings become ascending days with exact values', async () => {
    srv.log.length = 0;
    const got = await fng().fetch('2026-09-01', '2026-10-03');
    assert.equal(got.kind, 'fear_greed');
    const raw = fixtureJson<{ data: { value: string; value_classification: string; timestamp: string }[] }>(
      'alternative_me/fng_limit30.reconstructed.json',
    ).data;
    assert.equal(got.points.length, raw.length);
    assert.deepStrictEqual(got.points.at(-1), { date: '2026-10-02', value: 72, classification: 'Greed' });
    assert.deepStrictEqual(
      got.points.map((p) => p.value),
      raw.map((r) => Number(r.value)).reverse(),
    );
    assert.equal(srv.log[0]!.url.pathname + srv.log[0]!.url.search, '/fng/?limit=0&format=json');
  });

  test('the real captured two-day response; only days before today', async () => {
    srv.script({ body: fixture('alternative_me/fng_limit2.captured_2026-09-29.json') });
    const got = await fng().fetch('2026-09-01', '2026-09-29');
    assert.deepStrictEqual(got.points, [{ date: '2026-09-28', value: 74, classification: 'Greed' }], '2026-09-29 is today: excluded');
  });

  test('a changed field names the source and the field; an upstream error; an empty list', async () => {
    const body = fixtureJson<{ data: Record<string, unknown>[] }>('alternative_me/fng_limit30.reconstructed.json');
    body.data[4]!.value = 44;
    srv.script({ body });
    await assert.rejects(
      fng().fetch('2026-09-01', '2026-10-03'),
      /^UpstreamError: alternative\.me Crypto Fear & Greed Index \/fng\/: \/fng\/\?limit=0&format=json: unexpected response format at field data\[4\]\.value/,
    );
    srv.script({ body: { name: 'Fear and Greed Index', data: [], metadata: { error: 'Service down' } } });
    await assert.rejects(fng().fetch('2026-09-01', '2026-10-03'), /upstream error 'Service down'/);
    srv.script({ body: { name: 'Fear and Greed Index', data: [], metadata: { error: null } } });
    assert.deepStrictEqual((await fng().fetch('2026-09-01', '2026-10-03')).points, []);
  });
});
