import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { eq, inArray } from 'drizzle-orm';
import { okEnvelope } from '../../src/http/envelope.ts';
import { DeletedThesisSchema, MAX_THESES, ThesisHealthSchema, ThesisListSchema, ThesisSchema } from '../../src/services/schemas/theses.ts';
import { theses } from '../../src/store/schema.ts';
import { expectError, harnessUnavailable, startHarness, testDatabase, type Harness } from '../helpers/harness.ts';
import { runSharedSecurityTests } from '../helpers/security.ts';

/** Theses: POST /thesis, GET /thesis, GET and DELETE /thesis/{id}, GET /thesis/{id}/health (API key or JWT; owner only). */

const DATABASE = testDatabase();
const SKIP = (await harnessUnavailable({ database: DATABASE })) ?? undefined;
let h: Harness;
const harness = () => h;
/** An api-tier user (500 per minute: the validation tests make many calls) and another user. */
let owner: Awaited<ReturnType<Harness['keyFor']>>;
let other: Awaited<ReturnType<Harness['keyFor']>>;

const VALID = {
  asset: 'ETH',
  direction: 'long',
  title: 'ETH recovers',
  entry_price: 3000,
  target_price: 4000,
  stop_price: 2500,
  horizon_days: 90,
  conditions: [
    { id: 'oversold', metric: 'rsi_14', operator: 'lt', value: 30, kind: 'warning' },
    { metric: 'regime', operator: 'eq', value: 'bear', kind: 'invalidation' },
  ],
};

async function create(body: unknown, token = owner.key) {
  return h.request('POST', '/api/v1/thesis', { token, body });
}

before(async () => {
  if (SKIP) return;
  h = await startHarness({ database: DATABASE });
  owner = await h.keyFor('api', 'thesis-owner');
  other = await h.keyFor('api', 'thesis-other');
});
after(async () => h?.stop());

describe('theses', { skip: SKIP }, () => {
  describe('happy', () => {
    test('POST /thesis creates a thesis (201): canonical asset, given and generated condition ids, kind defaults to warning', async () => {
      const r = await create({ ...VALID, conditions: [...VALID.conditions, { metric: 'signal', operator: 'neq', value: 'strong_sell' }] });
      assert.equal(r.status, 201, r.raw);
      const t = okEnvelope(ThesisSchema).parse(r.body).data;
      assert.equal(t.asset, 'ethereum');
      assert.equal(t.symbol, 'ETH');
      assert.equal(t.direction, 'long');
      assert.equal(t.title, 'ETH recovers');
      assert.deepEqual([t.entry_price, t.target_price, t.stop_price, t.horizon_days], [3000, 4000, 2500, 90]);
      assert.equal(t.conditions.length, 3);
      assert.equal(t.conditions[0]!.id, 'oversold');
      assert.match(t.conditions[1]!.id, /^[0-9a-f-]{36}$/);
      assert.equal(t.conditions[2]!.kind, 'warning');
      const got = await h.request('GET', `/api/v1/thesis/${t.id}`, { token: owner.key });
      assert.equal(got.status, 200);
      assert.deepEqual(okEnvelope(ThesisSchema).parse(got.body).data, t);
    });

    test('a minimal thesis: prices, horizon and conditions are optional; a short thesis takes its stop above entry', async () => {
      const min = await create({ asset: 'bitcoin', direction: 'short', title: 'BTC tops' });
      assert.equal(min.status, 201, min.raw);
      const t = okEnvelope(ThesisSchema).parse(min.body).data;
      assert.deepEqual([t.entry_price, t.target_price, t.stop_price, t.horizon_days, t.conditions], [null, null, null, null, []]);
      const short = await create({
        asset: 'sol',
        direction: 'short',
        title: 'SOL fades',
        entry_price: 200,
        stop_price: 220,
        target_price: 150,
      });
      assert.equal(short.status, 201, short.raw);
    });

    test('GET /thesis lists newest first', async () => {
      const u = await h.keyFor('api');
      const ids: string[] = [];
      for (const title of ['first', 'second', 'third']) {
        const r = await create({ asset: 'btc', direction: 'long', title }, u.key);
        assert.equal(r.status, 201, r.raw);
        ids.push(r.body.data.id);
      }
      const list = okEnvelope(ThesisListSchema).parse((await h.request('GET', '/api/v1/thesis', { token: u.key })).body).data.theses;
      assert.deepEqual(
        list.map((t) => t.id),
        ids.reverse(),
      );
      assert.deepEqual(
        list.map((t) => t.title),
        ['third', 'second', 'first'],
      );
      for (let i = 1; i < list.length; i++) assert.ok(list[i - 1]!.created_at >= list[i]!.created_at);
    });

    test('the owner sees the same theses with their API key and their JWT', async () => {
      const u = await h.keyFor('pro');
      const byJwt = await create({ asset: 'eth', direction: 'long', title: 'by jwt' }, u.jwt);
      assert.equal(byJwt.status, 201, byJwt.raw);
      const byKey = await create({ asset: 'eth', direction: 'long', title: 'by key' }, u.key);
      assert.equal(byKey.status, 201, byKey.raw);
      const viaKey = (await h.request('GET', '/api/v1/thesis', { token: u.key })).body.data.theses;
      const viaJwt = (await h.request('GET', '/api/v1/thesis', { token: u.jwt })).body.data.theses;
      assert.deepEqual(viaKey, viaJwt);
      assert.deepEqual(
        viaKey.map((t: { title: string }) => t.title),
        ['by key', 'by jwt'],
      );
    });

    test('GET /thesis/{id}/health evaluates the thesis against the current data', async () => {
      const t = (await create(VALID)).body.data;
      const r = await h.request('GET', `/api/v1/thesis/${t.id}/health`, { token: owner.key });
      assert.equal(r.status, 200, r.raw);
      const health = okEnvelope(ThesisHealthSchema).parse(r.body).data;
      assert.equal(health.thesis_id, t.id);
      assert.equal(health.asset, 'ethereum');
      assert.equal(health.as_of, '2025-09-30');
      assert.equal(typeof health.current.price_usd, 'number');
      // The 90-day horizon runs from created_at on the wall clock, not from the data's as_of.
      const endsAt = Date.parse(t.created_at) + 90 * 86_400_000;
      assert.deepEqual(health.horizon, {
        days: 90,
        ends_at: new Date(endsAt).toISOString(),
        // 90 unless the database's clock (created_at) and the service's differ.
        days_left: Math.ceil((endsAt - Date.parse(health.evaluated_at)) / 86_400_000),
        passed: false,
      });
      assert.ok(health.horizon!.days_left >= 89 && health.horizon!.days_left <= 91, String(health.horizon!.days_left));
      // The staleness of the answers it read is carried through: the ETH signal's (its chain
      // TVL lags at the bundled as-of day) and the ETH chain health's.
      const signal = (await h.request('GET', '/api/v1/signals/eth', { token: owner.key })).body.data;
      const chain = (await h.request('GET', '/api/v1/chain-health/eth', { token: owner.key })).body.data;
      assert.equal(signal.stale, true, 'the bundled ETH signal has a stale input');
      assert.equal(health.stale, true);
      for (const part of [signal.stale_reason, chain.stale_reason].filter(Boolean).flatMap((x: string) => x.split('; ')))
        assert.ok(health.stale_reason!.includes(part), part);
      const none = (await create({ ...VALID, horizon_days: null })).body.data;
      const noHorizon = (await h.request('GET', `/api/v1/thesis/${none.id}/health`, { token: owner.key })).body.data;
      assert.equal(noHorizon.horizon, null);
    });

    test('GET /thesis?include_health=true gives every thesis with its health in one request', async () => {
      const u = await h.keyFor('api', 'thesis-list-health');
      const a = (await create(VALID, u.key)).body.data;
      const b = (await create({ ...VALID, asset: 'BTC', title: 'BTC', horizon_days: null }, u.key)).body.data;
      const r = await h.request('GET', '/api/v1/thesis?include_health=true', { token: u.key });
      assert.equal(r.status, 200, r.raw);
      const listed = okEnvelope(ThesisListSchema).parse(r.body).data.theses;
      assert.deepEqual(
        listed.map((t) => t.id),
        [b.id, a.id],
      );
      for (const t of listed) {
        const one = (await h.request('GET', `/api/v1/thesis/${t.id}/health`, { token: u.key })).body.data;
        assert.deepEqual({ ...t.health, evaluated_at: null }, { ...one, evaluated_at: null }, t.title);
        assert.equal(t.health_error, undefined);
      }
      // Without the flag: the theses alone, as before.
      const plain = (await h.request('GET', '/api/v1/thesis', { token: u.key })).body.data.theses;
      assert.ok(plain.every((t: object) => !('health' in t)));
      expectError(await h.request('GET', '/api/v1/thesis?include_health=maybe', { token: u.key }), 400, 'INVALID_PARAMETER');
    });

    test('GET /thesis pages newest first with limit and cursor: every thesis once, a deletion between pages skips nothing', async () => {
      const u = await h.keyFor('api', 'thesis-pages');
      const made = await Promise.all(Array.from({ length: 7 }, (_, i) => create({ ...VALID, title: `T${i}` }, u.key)));
      // Four of them share one creation time, to the microsecond: the id breaks the tie.
      const tied = made.slice(0, 4).map((r) => r.body.data.id as string);
      await h.svc.database.db.update(theses).set({ createdAt: '2026-01-01 00:00:00.123456+00' }).where(inArray(theses.id, tied));
      const all = okEnvelope(ThesisListSchema).parse((await h.request('GET', '/api/v1/thesis?limit=200', { token: u.key })).body).data;
      assert.deepEqual(
        all.theses.filter((t) => tied.includes(t.id)).map((t) => t.id),
        [...tied].sort().reverse(),
        'equal times: id descending',
      );
      assert.equal(all.theses.length, 7);
      assert.equal(all.next_cursor, null);
      assert.equal(all.limit, 200);
      const created = all.theses.map((t) => t.created_at);
      assert.deepEqual(created, [...created].sort().reverse(), 'newest first');
      // The default page is 50.
      assert.equal((await h.request('GET', '/api/v1/thesis', { token: u.key })).body.data.limit, 50);

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
        const r = await h.request('GET', `/api/v1/thesis?limit=3&include_health=true${q}`, { token: u.key });
        assert.equal(r.status, 200, r.raw);
        const page = okEnvelope(ThesisListSchema).parse(r.body).data;
        assert.ok(page.theses.length <= 3);
        assert.ok(page.theses.every((t) => t.health !== undefined));
        seen.push(...page.theses.map((t) => t.id));
        if (pages === 0) {
          // Deleting one of the first page's theses does not move the pages after it.
          const gone = page.theses[0]!.id;
          assert.equal((await h.request('DELETE', `/api/v1/thesis/${gone}`, { token: u.key })).status, 200);
        }
        cursor = page.next_cursor;
        pages++;
      } while (cursor !== null && pages < 10);
      assert.equal(pages, 3);
      assert.deepEqual(
        seen,
        all.theses.map((t) => t.id),
      );

      // Another user's cursor is only a position: it shows the caller's own theses, nothing of theirs.
      const first = (await h.request('GET', '/api/v1/thesis?limit=1', { token: u.key })).body.data;
      const foreign = (await h.request('GET', `/api/v1/thesis?cursor=${first.next_cursor}`, { token: other.key })).body.data;
      assert.ok(foreign.theses.every((t: { id: string }) => !seen.includes(t.id)));

      for (const [query, field] of [
        ['limit=0', 'limit'],
        ['limit=201', 'limit'],
        ['limit=1.5', 'limit'],
        ['cursor=abc', 'cursor'],
        [`cursor=${Buffer.from(`2026-02-30 10:00:00.123456|${seen[0]}`).toString('base64url')}`, 'cursor'],
        [`cursor=${Buffer.from(`0000-01-01 10:00:00.000000|${seen[0]}`).toString('base64url')}`, 'cursor'],
        [`cursor=${Buffer.from(`2026-01-01 10:00:00.000000|not-a-uuid`).toString('base64url')}`, 'cursor'],
        [`cursor=${'x'.repeat(201)}`, 'cursor'],
      ]) {
        const r = await h.request('GET', `/api/v1/thesis?${query}`, { token: u.key });
        expectError(r, 400, 'INVALID_PARAMETER');
        assert.match(r.body.error.message, new RegExp(`'${field}'`), query);
      }
      const bad = await h.request('GET', '/api/v1/thesis?cursor=abc', { token: u.key });
      // Refused by the service, worded like a schema refusal: the query parameter named, its location.
      assert.match(
        bad.body.error.message,
        /^Invalid query parameter 'cursor': not a next_cursor of this list; .*next_cursor of this list's previous page back unchanged/,
      );
      assert.deepEqual(bad.body.error.details, { location: 'querystring', field: 'cursor' });
      // A cursor the service gave for the other list (GET /keys) is refused in the same words,
      // not called one the service never gave.
      const jwt = await h.jwt(`cursor-mix-${Date.now()}`);
      for (const name of ['a', 'b'])
        assert.equal((await h.request('POST', '/api/v1/keys/create', { token: jwt, body: { name } })).status, 201);
      const keysPage = await h.request('GET', '/api/v1/keys?limit=1', { token: jwt });
      const keysCursor = String(keysPage.body.data.next_cursor);
      const mixed = await h.request('GET', `/api/v1/thesis?cursor=${encodeURIComponent(keysCursor)}`, { token: u.key });
      expectError(mixed, 400, 'INVALID_PARAMETER');
      assert.match(mixed.body.error.message, /^Invalid query parameter 'cursor': not a next_cursor of this list; /);
    });

    test('an id in capitals finds the thesis, and DELETE answers the id the thesis has (as GET and /health do), not the one typed', async () => {
      const t = (await create(VALID)).body.data;
      const upper = t.id.toUpperCase();
      const health = await h.request('GET', `/api/v1/thesis/${upper}/health`, { token: owner.key });
      assert.equal(health.status, 200, health.raw);
      assert.equal(health.body.data.thesis_id, t.id);
      const del = await h.request('DELETE', `/api/v1/thesis/${upper}`, { token: owner.key });
      assert.equal(del.status, 200, del.raw);
      assert.deepEqual(okEnvelope(DeletedThesisSchema).parse(del.body).data, { id: t.id, deleted: true });
    });

    test('DELETE /thesis/{id} deletes it: then GET is 404 and DELETE again is 404', async () => {
      const t = (await create(VALID)).body.data;
      const del = await h.request('DELETE', `/api/v1/thesis/${t.id}`, { token: owner.key });
      assert.equal(del.status, 200, del.raw);
      assert.deepEqual(okEnvelope(DeletedThesisSchema).parse(del.body).data, { id: t.id, deleted: true });
      const get = await h.request('GET', `/api/v1/thesis/${t.id}`, { token: owner.key });
      expectError(get, 404, 'NOT_FOUND');
      assert.equal(
        get.body.error.message,
        `Thesis '${t.id}' not found among your theses (GET /api/v1/thesis lists them, as does the dashboard's /account page)`,
      );
      expectError(await h.request('GET', `/api/v1/thesis/${t.id}/health`, { token: owner.key }), 404, 'NOT_FOUND');
      expectError(await h.request('DELETE', `/api/v1/thesis/${t.id}`, { token: owner.key }), 404, 'NOT_FOUND');
      const list = (await h.request('GET', '/api/v1/thesis', { token: owner.key })).body.data.theses;
      assert.ok(!list.some((x: { id: string }) => x.id === t.id));
    });
  });

  describe('errors', () => {
    /** Each invalid body: 400 INVALID_PARAMETER whose message names the field. */
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        'asset unsupported',
        { ...VALID, asset: 'xyz' },
        /^Invalid body field 'asset': asset 'xyz' is not supported; give one of bitcoin \(BTC\), .*, by id or ticker$/,
      ],
      ['asset missing', { direction: 'long', title: 't' }, /asset/],
      ['direction not long or short', { ...VALID, direction: 'up' }, /direction/],
      ['title empty', { ...VALID, title: '' }, /title/],
      ['title only spaces', { ...VALID, title: '   ' }, /title/],
      ['title too long', { ...VALID, title: 'x'.repeat(201) }, /title/],
      ['title with a control character', { ...VALID, title: 'a\u0007b' }, /title/],
      ['title with a bidirectional override', { ...VALID, title: '\u202eabc' }, /title.*invisible formatting/],
      ['title of a zero-width space', { ...VALID, title: '\u200b' }, /title/],
      // Whole Unicode categories, not a list: the Arabic letter mark (a bidirectional mark), the
      // soft hyphen, the line separator, a tag character (invisible ASCII), a Hangul filler, an
      // unpaired surrogate.
      ['title with the Arabic letter mark', { ...VALID, title: 'a\u061cb' }, /title.*invisible formatting/],
      ['title with a soft hyphen', { ...VALID, title: 'a\u00adb' }, /title/],
      ['title with a line separator', { ...VALID, title: 'a\u2028b' }, /title/],
      ['title with a tag character', { ...VALID, title: 'ETH\u{E0041}\u{E0042}' }, /title/],
      ['title of a Hangul filler', { ...VALID, title: '\u3164' }, /title/],
      ['title with an unpaired surrogate', { ...VALID, title: 'a\ud800b' }, /title.*unpaired surrogate/],
      ['a negative entry price', { ...VALID, entry_price: -1 }, /entry_price/],
      ['a zero target price', { ...VALID, target_price: 0 }, /target_price/],
      ['a negative stop price', { ...VALID, stop_price: -5 }, /stop_price/],
      ['a price that is a string', { ...VALID, entry_price: '3000' }, /entry_price/],
      ['stop above entry on a long', { ...VALID, stop_price: 3100 }, /stop_price/],
      [
        'stop below entry on a short',
        { ...VALID, direction: 'short', entry_price: 3000, stop_price: 2900, target_price: 2000 },
        /stop_price/,
      ],
      ['target below entry on a long', { ...VALID, target_price: 2900 }, /target_price/],
      [
        'stop above target on a long without an entry price',
        { ...VALID, entry_price: null, stop_price: 120000, target_price: 100000 },
        /stop_price'.*must be below target_price for a long thesis/,
      ],
      [
        'stop below target on a short without an entry price',
        { ...VALID, direction: 'short', entry_price: null, stop_price: 2000, target_price: 2500 },
        /stop_price'.*must be above target_price for a short thesis/,
      ],
      [
        'target above entry on a short',
        { ...VALID, direction: 'short', entry_price: 3000, stop_price: 3500, target_price: 3100 },
        /target_price/,
      ],
      ['horizon_days out of range', { ...VALID, horizon_days: 0 }, /horizon_days/],
      // A missing field says it is required (not zod's "expected string, received undefined").
      ['no title', { ...VALID, title: undefined }, /^Invalid body field 'title': required, expected string$/],
      ['no direction', { ...VALID, direction: undefined }, /^Invalid body field 'direction': required, expected one of "long"\|"short"$/],
      // Plain messages with the bound and the value given (not zod's "Too small: expected number to be >0").
      ['a zero entry price', { ...VALID, entry_price: 0 }, /^Invalid body field 'entry_price': must be above 0, got 0$/],
      [
        'a price over the cap',
        { ...VALID, entry_price: 1e13 },
        /^Invalid body field 'entry_price': must be at most 1e12 \(USD, the cap of every thesis price\), got 1e13: give a price at most 1e12$/,
      ],
      ['a price as text', { ...VALID, entry_price: '3000' }, /^Invalid body field 'entry_price': must be a number, got a string$/],
      ['a fractional horizon', { ...VALID, horizon_days: 1.5 }, /^Invalid body field 'horizon_days': must be an integer, got 1\.5$/],
      // Past the safe integers the message still gives the route's own bound, 3650 (not
      // zod's safe-integer bound, 9.007199254740991e15, which tells the caller nothing to do).
      [
        'a horizon of 1e300 days',
        { ...VALID, horizon_days: 1e300 },
        /^Invalid body field 'horizon_days': must be at most 3650, got 1e300$/,
      ],
      [
        'a horizon of -1e300 days',
        { ...VALID, horizon_days: -1e300 },
        /^Invalid body field 'horizon_days': must be at least 1, got -1e300$/,
      ],
      [
        'an unknown direction',
        { ...VALID, direction: 'sideways' },
        /^Invalid body field 'direction': must be one of "long"\|"short", got "sideways"$/,
      ],
      ['an empty title', { ...VALID, title: '  ' }, /^Invalid body field 'title': must not be empty$/],
      [
        'a condition value that is neither a number nor a level',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'lt', value: true }] },
        /^Invalid body field 'conditions\.0\.value': must be a finite number \(numeric metrics\) or a level name \(signal, regime\)$/,
      ],
      [
        'fear_greed equal to a fraction',
        { ...VALID, conditions: [{ metric: 'fear_greed', operator: 'eq', value: 50.5 }] },
        /^Invalid body field 'conditions\.0\.value': fear_greed is a whole number \(0\.\.100\), so eq 50\.5 would never hold/,
      ],
      [
        'a condition with an unknown metric',
        { ...VALID, conditions: [{ metric: 'volume', operator: 'gt', value: 1 }] },
        /conditions\.0\.metric/,
      ],
      [
        'a condition with an unknown operator',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'between', value: 1 }] },
        /conditions\.0\.operator/,
      ],
      [
        'a categorical value that is not a level',
        { ...VALID, conditions: [{ metric: 'signal', operator: 'eq', value: 'moon' }] },
        /conditions\.0\.value/,
      ],
      [
        'a regime value that is a number',
        { ...VALID, conditions: [{ metric: 'regime', operator: 'eq', value: 1 }] },
        /conditions\.0\.value/,
      ],
      [
        'a numeric metric with a text value',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'lt', value: 'low' }] },
        /conditions\.0\.value/,
      ],
      [
        'a chain health condition on an asset without a chain (it could never be evaluated)',
        {
          ...VALID,
          asset: 'btc',
          conditions: [
            { metric: 'rsi_14', operator: 'lt', value: 30 },
            { metric: 'chain_health_score', operator: 'lt', value: 40 },
          ],
        },
        /conditions\.1\.metric'.*BTC has no chain health score \(only ETH, SOL, HYPE have one\)/,
      ],
      [
        'a funding-rate condition on an asset without a funding source (it could never be evaluated)',
        { ...VALID, asset: 'link', conditions: [{ metric: 'funding_rate', operator: 'gt', value: 0.001, kind: 'invalidation' }] },
        /conditions\.0\.metric'.*LINK has no funding-rate data as of 2025-09-30/,
      ],
      // Values off a metric's scale could never hold or would always hold.
      [
        'an RSI above 100',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'lt', value: 150 }] },
        /^Invalid body field 'conditions\.0\.value': 150 is outside the scale of 'rsi_14' \(from 0 to 100\): give a value from 0 to 100$/,
      ],
      [
        'a Fear & Greed value above 100',
        { ...VALID, conditions: [{ metric: 'fear_greed', operator: 'gt', value: 1000 }] },
        /conditions\.0\.value'.*outside the scale of 'fear_greed'/,
      ],
      [
        'a signal score above 1',
        { ...VALID, conditions: [{ metric: 'signal_score', operator: 'gt', value: 5 }] },
        /conditions\.0\.value'.*from -1 to 1/,
      ],
      [
        'a negative price',
        { ...VALID, conditions: [{ metric: 'price_usd', operator: 'lt', value: -1 }] },
        /conditions\.0\.value'.*give a value above 0/,
      ],
      // Capped as entry, target and stop prices are (1e308 is no price).
      [
        'a price condition over the price cap',
        { ...VALID, conditions: [{ metric: 'price_usd', operator: 'gt', value: 1e13 }] },
        /^Invalid body field 'conditions\.0\.value': must be at most 1e12 for metric 'price_usd' \(USD, the cap of every thesis price\), got 1e13: give a price at most 1e12$/,
      ],
      [
        'a price condition of the largest double',
        { ...VALID, conditions: [{ metric: 'price_usd', operator: 'lt', value: 1.7976931348623157e308, kind: 'invalidation' }] },
        /conditions\.0\.value'.*got 1\.7976931348623157e308/,
      ],
      [
        'a 7-day fall beyond -100 %',
        { ...VALID, conditions: [{ metric: 'change_7d_pct', operator: 'lt', value: -150 }] },
        /conditions\.0\.value'.*at least -100/,
      ],
      [
        'an RSI below 0 (the end of its scale)',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'lt', value: 0 }] },
        /conditions\.0\.operator'.*rsi_14 lt 0 would never hold \(0 is an end of its scale\)/,
      ],
      [
        'a signal score at most 1',
        { ...VALID, conditions: [{ metric: 'signal_score', operator: 'lte', value: 1 }] },
        /conditions\.0\.operator'.*would always hold/,
      ],
      [
        'a regime above bull',
        { ...VALID, conditions: [{ metric: 'regime', operator: 'gt', value: 'bull' }] },
        /conditions\.0\.operator'.*regime gt bull would never hold \(the scale runs bear < neutral < bull\)/,
      ],
      [
        'a signal at or above strong_sell',
        { ...VALID, conditions: [{ metric: 'signal', operator: 'gte', value: 'strong_sell' }] },
        /conditions\.0\.operator'.*would always hold/,
      ],
      [
        'a condition with an unknown kind',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'lt', value: 30, kind: 'fatal' }] },
        /conditions\.0\.kind/,
      ],
      [
        'duplicate condition ids',
        {
          ...VALID,
          conditions: [
            { id: 'a', metric: 'rsi_14', operator: 'lt', value: 30 },
            { id: 'a', metric: 'rsi_14', operator: 'gt', value: 70 },
          ],
        },
        /conditions\.1\.id/,
      ],
      ['a price past 1e12 USD', { ...VALID, target_price: 1.7976931348623157e308 }, /'target_price'/],
      ['an unknown extra field', { ...VALID, leverage: 10 }, /^Unknown body field 'leverage': remove it \(the API reference at \/docs/],
      [
        'an unknown field in a condition',
        { ...VALID, conditions: [{ metric: 'rsi_14', operator: 'lt', value: 30, weight: 2 }] },
        /^Unknown body field 'conditions\.0\.weight': remove it/,
      ],
      [
        'more than 20 conditions',
        { ...VALID, conditions: Array.from({ length: 21 }, () => ({ metric: 'rsi_14', operator: 'lt', value: 30 })) },
        /conditions/,
      ],
    ];
    for (const [what, body, field] of cases) {
      test(`POST /thesis: ${what} -> 400 INVALID_PARAMETER naming the field`, async () => {
        const r = await create(body);
        expectError(r, 400, 'INVALID_PARAMETER');
        assert.match(r.body.error.message, field);
        // Refused by the body's schema or by the service (an unsupported asset, a metric the
        // asset lacks): the details say where, as for every other field.
        assert.equal(r.body.error.details?.location, 'body', JSON.stringify(r.body.error));
      });
    }

    test('POST /thesis: a title with emoji joined by U+200D or Persian text with U+200C is accepted', async () => {
      for (const title of [
        'Family 👨\u200d👩\u200d👧 long',
        'می\u200cخواهم',
        'ETH ❤️ 🇫🇷 café 日本 Ωmega',
        'Go 🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F} fans',
      ]) {
        const r = await create({ ...VALID, title });
        assert.equal(r.status, 201, r.raw);
        assert.equal(r.body.data.title, title);
      }
    });

    test('POST /thesis: duplicate condition ids are named in the message', async () => {
      const r = await create({
        ...VALID,
        conditions: [
          { id: 'dup', metric: 'rsi_14', operator: 'lt', value: 30 },
          { id: 'dup', metric: 'rsi_14', operator: 'gt', value: 70 },
        ],
      });
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.match(r.body.error.message, /duplicate condition id 'dup'/);
    });

    test('POST /thesis: a stop the current price has already reached is 400 naming stop_price, the price and its day; nothing is stored', async () => {
      const u = await h.keyFor('api');
      const eth = (await h.request('GET', '/api/v1/signals/eth', { token: u.key })).body.data as { price_usd: number; as_of: string };
      const sol = (await h.request('GET', '/api/v1/signals/sol', { token: u.key })).body.data as { price_usd: number; as_of: string };
      const bodies: [Record<string, unknown>, { price_usd: number; as_of: string }][] = [
        // A long whose stop is at, or above, the price: its health would read "invalidated" at once.
        [{ asset: 'ETH', direction: 'long', title: 'stop at the price', stop_price: eth.price_usd }, eth],
        [{ asset: 'ETH', direction: 'long', title: 'stop above', stop_price: eth.price_usd * 1.1, target_price: eth.price_usd * 2 }, eth],
        // A short the other way round.
        [{ asset: 'SOL', direction: 'short', title: 'stop at the price', stop_price: sol.price_usd }, sol],
        [{ asset: 'sol', direction: 'short', title: 'stop below', stop_price: sol.price_usd * 0.9, target_price: 1 }, sol],
      ];
      for (const [body, now] of bodies) {
        const r = await create(body, u.key);
        expectError(r, 400, 'INVALID_PARAMETER');
        assert.deepEqual(r.body.error.details, { location: 'body', field: 'stop_price', price_usd: now.price_usd, as_of: now.as_of });
        const long = body.direction === 'long';
        assert.equal(
          r.body.error.message,
          `Invalid body field 'stop_price': ${body.stop_price} is at or ${long ? 'above' : 'below'} ${long ? 'ETH' : 'SOL'}'s current price ${now.price_usd} USD (as of ${now.as_of}), so this ${body.direction} thesis would be invalidated at once; give a stop_price ${long ? 'below' : 'above'} ${now.price_usd}, or leave it out`,
        );
      }
      assert.equal(eth.as_of, '2025-09-30');
      assert.deepEqual((await h.request('GET', '/api/v1/thesis', { token: u.key })).body.data.theses, []);
      // Just on the right side of the price, the same theses are accepted, and their health is not invalidated.
      for (const [body] of [
        [{ asset: 'ETH', direction: 'long', title: 'stop below', stop_price: eth.price_usd * 0.99 }],
        [{ asset: 'SOL', direction: 'short', title: 'stop above', stop_price: sol.price_usd * 1.01 }],
      ]) {
        const r = await create(body, u.key);
        assert.equal(r.status, 201, r.raw);
        const health = (await h.request('GET', `/api/v1/thesis/${r.body.data.id}/health`, { token: u.key })).body.data;
        assert.equal(health.stop_hit, false);
        assert.notEqual(health.status, 'invalidated');
      }
    });

    test('POST /thesis: an invalid body stores nothing', async () => {
      const u = await h.keyFor('api');
      for (const [, body] of cases) assert.equal((await create(body, u.key)).status, 400);
      assert.deepEqual((await h.request('GET', '/api/v1/thesis', { token: u.key })).body.data.theses, []);
    });

    test(`a user keeps at most ${MAX_THESES} theses: concurrent creations at the limit store one, the rest are 409 THESIS_LIMIT_REACHED; a deletion frees a place`, async () => {
      const u = await h.keyFor('api');
      // All but one place taken by rows written directly (the API would need 499 requests).
      const row = { userId: u.userId, asset: 'bitcoin', direction: 'long' as const, title: 'filler', conditions: [] };
      await h.svc.database.db.insert(theses).values(Array.from({ length: MAX_THESES - 1 }, () => row));
      const results = await Promise.all(
        Array.from({ length: 6 }, () => create({ asset: 'BTC', direction: 'long', title: 'one more' }, u.key)),
      );
      const codes = results.map((r) => r.status).sort();
      assert.deepEqual(codes, [201, 409, 409, 409, 409, 409], results.map((r) => r.raw).join('\n'));
      const refused = results.find((r) => r.status === 409)!;
      expectError(refused, 409, 'THESIS_LIMIT_REACHED');
      assert.deepEqual(refused.body.error.details, { max_theses: MAX_THESES });
      assert.match(
        refused.body.error.message,
        new RegExp(
          `^Your account has reached its limit of ${MAX_THESES} theses; delete one you no longer follow first \\(DELETE /api/v1/thesis/\\{id\\}`,
        ),
      );
      const stored = await h.svc.database.db.select({ id: theses.id }).from(theses).where(eq(theses.userId, u.userId));
      assert.equal(stored.length, MAX_THESES);
      // With the JWT too; another user is not affected.
      expectError(await create({ asset: 'BTC', direction: 'long', title: 'by JWT' }, u.jwt), 409, 'THESIS_LIMIT_REACHED');
      assert.equal((await create({ asset: 'BTC', direction: 'long', title: 'someone else' }, other.key)).status, 201);
      assert.equal((await h.request('DELETE', `/api/v1/thesis/${stored[0]!.id}`, { token: u.key })).status, 200);
      assert.equal((await create({ asset: 'BTC', direction: 'long', title: 'after a deletion' }, u.key)).status, 201);
    });

    test('POST /thesis: a body that is not JSON, or not an object, is 400', async () => {
      const bad = await h.request('POST', '/api/v1/thesis', { token: owner.key, headers: { 'content-type': 'application/json' } });
      assert.equal(bad.status, 400, bad.raw);
      const res = await h.app.inject({
        method: 'POST',
        url: '/api/v1/thesis',
        headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json' },
        payload: '{"asset":',
        remoteAddress: h.freshIp(),
      });
      expectError({ status: res.statusCode, body: res.json() }, 400, 'INVALID_PARAMETER');
      expectError(await create([VALID]), 400, 'INVALID_PARAMETER');
    });

    test('bodies: a DELETE with a JSON Content-Type and no body works; wrong type, empty or too large bodies say what to send', async () => {
      const inject = (method: 'POST' | 'DELETE', url: string, contentType: string | undefined, payload: string) =>
        h.app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${owner.key}`, ...(contentType ? { 'content-type': contentType } : {}) },
          payload,
          remoteAddress: h.freshIp(),
        });
      // Many HTTP clients send Content-Type: application/json on every request, DELETE included.
      const t = (await create(VALID)).body.data;
      const del = await inject('DELETE', `/api/v1/thesis/${t.id}`, 'application/json', '');
      assert.equal(del.statusCode, 200, del.body);
      assert.equal(del.json().data.deleted, true);
      const t2 = (await create(VALID)).body.data;
      const del2 = await inject('DELETE', `/api/v1/thesis/${t2.id}`, 'text/plain', '');
      assert.equal(del2.statusCode, 200, del2.body);
      const stored = async () => (await h.request('GET', '/api/v1/thesis', { token: owner.key })).body.data.theses.length as number;
      const before = await stored();
      // A JSON document sent as text/plain, a form, or no Content-Type at all.
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
        const r = await inject('POST', '/api/v1/thesis', type, JSON.stringify(VALID));
        expectError({ status: r.statusCode, body: r.json() }, 400, 'INVALID_PARAMETER');
        assert.match(
          r.json().error.message,
          /^Unsupported Content-Type .*send the body as JSON with Content-Type: application\/json$/,
          type,
        );
        assert.equal(r.json().error.details.location, 'body');
      }
      const empty = await inject('POST', '/api/v1/thesis', 'application/json', '');
      assert.match(empty.json().error.message, /The body is empty .*send a JSON object/);
      const big = await inject('POST', '/api/v1/thesis', 'application/json', JSON.stringify({ ...VALID, pad: 'x'.repeat(2_000_000) }));
      expectError({ status: big.statusCode, body: big.json() }, 400, 'INVALID_PARAMETER');
      assert.match(big.json().error.message, /too large: at most 1,048,576 bytes/);
      const proto = await inject('POST', '/api/v1/thesis', 'application/json', '{"__proto__":{"x":1}}');
      assert.match(proto.json().error.message, /not valid JSON .*__proto__/);
      assert.equal(await stored(), before, 'nothing of these was stored');
    });

    test('an id that is not a UUID, or unknown, is 404 on GET, DELETE and /health', async () => {
      for (const id of ['not-a-uuid', '00000000-0000-4000-8000-000000000000']) {
        for (const [method, path] of [
          ['GET', `/api/v1/thesis/${id}`],
          ['DELETE', `/api/v1/thesis/${id}`],
          ['GET', `/api/v1/thesis/${id}/health`],
        ] as const) {
          const r = await h.request(method, path, { token: owner.key });
          expectError(r, 404, 'NOT_FOUND');
          assert.equal(
            r.body.error.message,
            `Thesis '${id}' not found among your theses (GET /api/v1/thesis lists them, as does the dashboard's /account page)`,
            `${method} ${path}`,
          );
        }
      }
    });
  });

  describe('security', () => {
    test("another user's thesis is 404 on GET, DELETE and /health, with their key or their JWT, and stays for its owner", async () => {
      const t = (await create(VALID)).body.data;
      for (const token of [other.key, other.jwt]) {
        for (const [method, path] of [
          ['GET', `/api/v1/thesis/${t.id}`],
          ['DELETE', `/api/v1/thesis/${t.id}`],
          ['GET', `/api/v1/thesis/${t.id}/health`],
        ] as const) {
          const r = await h.request(method, path, { token });
          expectError(r, 404, 'NOT_FOUND');
          assert.equal(
            r.body.error.message,
            `Thesis '${t.id}' not found among your theses (GET /api/v1/thesis lists them, as does the dashboard's /account page)`,
            `${method} ${path}`,
          );
        }
      }
      const list = (await h.request('GET', '/api/v1/thesis', { token: other.key })).body.data.theses;
      assert.ok(!list.some((x: { id: string }) => x.id === t.id), "not in the other user's list");
      assert.equal((await h.request('GET', `/api/v1/thesis/${t.id}`, { token: owner.key })).status, 200);
    });

    runSharedSecurityTests(harness, {
      name: 'GET /thesis/{id}/health',
      method: 'GET',
      path: (c) => `/api/v1/thesis/${c.thesisId}/health`,
      policy: 'api-key-or-user',
      ownerScoped: true,
    });
    runSharedSecurityTests(harness, {
      name: 'GET /thesis/{id}',
      method: 'GET',
      path: (c) => `/api/v1/thesis/${c.thesisId}`,
      policy: 'api-key-or-user',
      ownerScoped: true,
    });
    runSharedSecurityTests(harness, {
      name: 'DELETE /thesis/{id}',
      method: 'DELETE',
      path: (c) => `/api/v1/thesis/${c.thesisId}`,
      policy: 'api-key-or-user',
      ownerScoped: true,
    });
    runSharedSecurityTests(harness, { name: 'GET /thesis', method: 'GET', path: () => '/api/v1/thesis', policy: 'api-key-or-user' });
    runSharedSecurityTests(harness, {
      name: 'POST /thesis',
      method: 'POST',
      path: () => '/api/v1/thesis',
      body: () => ({ asset: 'bitcoin', direction: 'long', title: 't', conditions: [] }),
      policy: 'api-key-or-user',
    });
  });
});

describe('theses on an as-of day before an asset has data', { skip: SKIP }, () => {
  test('the list with include_health says why a thesis has no health instead of failing', async () => {
    const past = await startHarness({ database: DATABASE, config: { AS_OF: '2024-06-01' } });
    try {
      const u = await past.keyFor('api', 'thesis-before-data');
      const post = (body: unknown) => past.request('POST', '/api/v1/thesis', { token: u.key, body });
      const hype = (await post({ ...VALID, asset: 'HYPE', title: 'HYPE', conditions: [] })).body.data;
      const btc = (await post({ ...VALID, asset: 'BTC', title: 'BTC' })).body.data;
      const r = await past.request('GET', '/api/v1/thesis?include_health=true', { token: u.key });
      assert.equal(r.status, 200, r.raw);
      const byId = new Map(
        okEnvelope(ThesisListSchema)
          .parse(r.body)
          .data.theses.map((t) => [t.id, t]),
      );
      assert.equal(byId.get(btc.id)!.health!.as_of, '2024-06-01');
      assert.equal(byId.get(hype.id)!.health, null);
      const single = await past.request('GET', `/api/v1/thesis/${hype.id}/health`, { token: u.key });
      // The thesis exists (not a 404): its health cannot be told on this day, and the answer says why.
      expectError(single, 503, 'SERVICE_UNAVAILABLE');
      assert.match(
        single.body.error.message,
        new RegExp(`^Thesis '${hype.id}' cannot be evaluated now: Asset '.*' has no current signal: no price data on or before 2024-06-01`),
      );
      // A state of the data, not a passing failure: no wait is named.
      assert.equal(single.headers['retry-after'], undefined);
      assert.deepEqual(byId.get(hype.id)!.health_error, { code: 'SERVICE_UNAVAILABLE', message: single.body.error.message });
    } finally {
      await past.stop();
    }
  });
});
