import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLiveSources, UpstreamError } from '../../src/providers/live/index.ts';
import { fixture, fixtureJson, startFixtureServer } from '../helpers/fixture-server.ts';

describe('growthepie fundamentals (documented layout)', () => {
  let srv: Awaited<ReturnType<typeof startFixtureServer>>;
  before(async () => {
    srv = await startFixtureServer(() => ({ body: fixture('growthepie/v1_fundamentals_ethereum.documented.json') }));
  });
  after(() => srv.close());
  const raw = fixtureJson<{ metric_key: string; date: string; value: number }[]>('growthepie/v1_fundamentals_ethereum.documented.json');

  test('daa → metric:eth:active_addresses and txcount → metric:eth:transactions, exact values; concurrent fetches share one request', async () => {
    srv.log.length = 0;
    const sources = createLiveSources({ baseUrls: { growthepie: srv.url } });
    const [daa, tx] = await Promise.all(
      ['metric:eth:active_addresses', 'metric:eth:transactions'].map((id) =>
        sources.find((s) => s.series === id)!.fetch('2024-05-01', '2024-06-01'),
      ),
    );
    const pick = (k: string) => raw.filter((r) => r.metric_key === k).map((r) => ({ date: r.date, value: r.value }));
    assert.deepStrictEqual(daa!.points, pick('daa'));
    assert.deepStrictEqual(tx!.points, pick('txcount'));
    assert.equal(daa!.points.length, 7);
    assert.equal(srv.log.length, 1);
    assert.equal(srv.log[0]!.url.pathname, '/v1/fundamentals.json');
  });

  test('a changed field is named; an empty list is no points', async () => {
    srv.script({ body: [{ metric: 'daa', origin_key: 'ethereum', date: '2024-05-25', value: 1 }] });
    const s = createLiveSources({ baseUrls: { growthepie: srv.url }, retryMinTimeoutMs: 10 }).find(
      (x) => x.series === 'metric:eth:active_addresses',
    )!;
    await assert.rejects(
      s.fetch('2024-05-01', '2024-06-01'),
      /growthepie \/v1\/fundamentals\.json: \/v1\/fundamentals\.json: unexpected response format at field \[0\]\.metric_key/,
    );
    srv.script({ body: [] });
    assert.deepStrictEqual((await s.fetch('2024-05-01', '2024-06-01')).points, []);
  });

  test('a date that is no day of the calendar is a format error naming the field, not a row the database refuses', async () => {
    const s = createLiveSources({ baseUrls: { growthepie: srv.url }, retryMinTimeoutMs: 10 }).find(
      (x) => x.series === 'metric:eth:active_addresses',
    )!;
    for (const date of ['2024-02-30', '2024-13-01', '2024-05-00']) {
      srv.script({ body: [{ metric_key: 'daa', origin_key: 'ethereum', date, value: 1 }] });
      await assert.rejects(s.fetch('2024-01-01', '2024-06-01'), (e: unknown) => {
        assert.ok(e instanceof UpstreamError && e.kind === 'format', String(e));
        assert.match(e.message, /unexpected response format at field \[0\]\.date: not a day of the calendar/);
        return true;
      });
    }
  });
});
