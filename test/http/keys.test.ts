import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { checksum, KEY_PREFIX } from '../../src/auth/api-keys.ts';
import { okEnvelope } from '../../src/http/envelope.ts';
import { CreatedKeySchema, KeyListSchema } from '../../src/services/schemas/keys.ts';
import { expectError, harnessUnavailable, startHarness, testDatabase, type Harness } from '../helpers/harness.ts';
import { runSharedSecurityTests } from '../helpers/security.ts';

/** API keys: POST /keys/create, GET /keys, POST /keys/revoke (the JWT of a signed-in user only). */

const DATABASE = testDatabase();
const SKIP = (await harnessUnavailable({ database: DATABASE })) ?? undefined;
let h: Harness;
const harness = () => h;

const call = (method: string, url: string, token?: string, body?: unknown) => h.request(method, url, { token, body });

async function newKey(jwt: string): Promise<{ id: string; key: string }> {
  const r = await call('POST', '/api/v1/keys/create', jwt, { name: 'test' });
  assert.equal(r.status, 201, r.raw);
  return okEnvelope(CreatedKeySchema).parse(r.body).data;
}

before(async () => {
  if (SKIP) return;
  h = await startHarness({ database: DATABASE, config: { USAGE_FLUSH_MS: '100' } });
});
after(async () => h?.stop());

describe('API keys', { skip: SKIP }, () => {
  describe('happy', () => {
    test('create shows the key once in the svc_live_ format; list never shows it', async () => {
      const jwt = await h.idp.token('user-create', { email: 'create@example.com' });
      const created = await newKey(jwt);
      assert.match(created.key, /^svc_live_[0-9A-Za-z]{38}$/);
      const random = created.key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 32);
      assert.equal(created.key.slice(-6), checksum(random));
      const list = await call('GET', '/api/v1/keys', jwt);
      assert.equal(list.status, 200);
      const env = okEnvelope(KeyListSchema).parse(list.body);
      assert.equal(env.data.keys.length, 1);
      assert.equal(env.data.keys[0]!.prefix, created.key.slice(0, 13));
      assert.equal(env.data.keys[0]!.tier, 'free');
      assert.ok(!list.raw.includes(created.key));
    });

    test('revoke is idempotent, frees a slot, and is refused at once; usage is counted', async () => {
      const jwt = await h.idp.token('user-revoke');
      const k = await newKey(jwt);
      for (let i = 0; i < 3; i++) assert.equal((await call('GET', '/api/v1/assets', k.key)).status, 200);
      await h.svc.usage.flush();
      const listed = okEnvelope(KeyListSchema).parse((await call('GET', '/api/v1/keys', jwt)).body).data.keys[0]!;
      assert.equal(listed.usage.requests_total, 3);
      assert.equal(listed.usage.requests_today, 3);
      assert.ok(listed.usage.last_used_at);
      const r1 = await call('POST', '/api/v1/keys/revoke', jwt, { key_id: k.id });
      assert.equal(r1.status, 200);
      assert.equal(r1.body.data.status, 'revoked');
      const r2 = await call('POST', '/api/v1/keys/revoke', jwt, { key_id: k.id });
      assert.equal(r2.status, 200);
      assert.equal(r2.body.data.revoked_at, r1.body.data.revoked_at);
      const refused = await call('GET', '/api/v1/signals', k.key);
      assert.equal(refused.status, 401);
      assert.equal(refused.headers['www-authenticate']?.toString().startsWith('Bearer'), true);
    });

    test('tier comes from the user plan; pro keys read signal history', async () => {
      const jwt = await h.idp.token('user-pro', { email: 'pro@example.com' });
      const k = await newKey(jwt);
      assert.equal((await call('GET', '/api/v1/signal-history/bitcoin', k.key)).status, 403);
      assert.equal(await h.svc.keys.setTier('PRO@example.com', 'pro'), 1);
      const r = await call('GET', '/api/v1/signal-history/bitcoin', k.key);
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-service-tier'], 'pro');
      assert.equal(r.headers['x-ratelimit-limit'], '5000');
    });

    test('GET /keys pages: active keys first, then revoked ones newest first; every key once', async () => {
      const jwt = await h.jwt('user-paging');
      // 9 keys made and revoked, then 3 left active (the oldest active key made first).
      const revoked: string[] = [];
      for (let i = 0; i < 9; i++) {
        const k = await newKey(jwt);
        assert.equal((await call('POST', '/api/v1/keys/revoke', jwt, { key_id: k.id })).status, 200);
        revoked.push(k.id);
      }
      const active = [(await newKey(jwt)).id, (await newKey(jwt)).id, (await newKey(jwt)).id];
      const all = okEnvelope(KeyListSchema).parse((await call('GET', '/api/v1/keys?limit=100', jwt)).body).data;
      assert.equal(all.next_cursor, null);
      assert.deepEqual(
        all.keys.map((k) => k.id),
        [...active.reverse(), ...revoked.reverse()],
        'active newest first, then revoked newest first',
      );
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
        const page = okEnvelope(KeyListSchema).parse((await call('GET', `/api/v1/keys?limit=4${q}`, jwt)).body).data;
        assert.equal(page.limit, 4);
        assert.ok(page.keys.length <= 4);
        seen.push(...page.keys.map((k) => k.id));
        cursor = page.next_cursor;
        pages++;
      } while (cursor !== null && pages < 10);
      assert.deepEqual(
        seen,
        all.keys.map((k) => k.id),
      );
      assert.equal(pages, 3);
      // Pages smaller than the active keys: cursors inside the active group (rank 1) too
      // (through the service: key management allows 30 requests a minute per user).
      const small: string[] = [];
      let next: string | undefined;
      do {
        const page = await h.svc.keys.list({ userId: 'user-paging', email: null }, { limit: 2, cursor: next });
        small.push(...page.keys.map((k) => k.id));
        next = page.next_cursor ?? undefined;
      } while (next !== undefined && small.length < 20);
      assert.deepEqual(
        small,
        all.keys.map((k) => k.id),
      );
      // The default page holds 50; bad limits and cursors say what to send.
      assert.equal(okEnvelope(KeyListSchema).parse((await call('GET', '/api/v1/keys', jwt)).body).data.limit, 50);
      for (const [q, field] of [
        ['limit=0', 'limit'],
        ['limit=101', 'limit'],
        ['cursor=abc', 'cursor'],
        [`cursor=${Buffer.from(`2|2026-01-01 10:00:00.123456|${active[0]}`).toString('base64url')}`, 'cursor'],
      ] as const) {
        const r = await call('GET', `/api/v1/keys?${q}`, jwt);
        expectError(r, 400, 'INVALID_PARAMETER');
        assert.deepEqual(r.body.error.details, { location: 'querystring', field }, q);
      }
    });

    test('keyFor: a key of each tier lists with that tier', async () => {
      for (const tier of ['free', 'pro', 'api'] as const) {
        const k = await h.keyFor(tier);
        const list = okEnvelope(KeyListSchema).parse((await call('GET', '/api/v1/keys', k.jwt)).body);
        assert.deepEqual(
          list.data.keys.map((x) => [x.id, x.tier]),
          [[k.id, tier]],
        );
        assert.equal((await call('GET', '/api/v1/assets', k.key)).headers['x-service-tier'], tier);
      }
    });
  });

  describe('errors', () => {
    test('20 concurrent creations for one user leave exactly 5 active keys', async () => {
      const jwt = await h.idp.token('user-race');
      const results = await Promise.all(Array.from({ length: 20 }, () => call('POST', '/api/v1/keys/create', jwt, {})));
      const codes = results.map((r) => r.status).sort();
      assert.equal(codes.filter((c) => c === 201).length, 5, codes.join(','));
      for (const r of results.filter((x) => x.status !== 201)) {
        assert.equal(r.status, 409);
        assert.equal(r.body.error.code, 'KEY_LIMIT_REACHED');
      }
      const list = okEnvelope(KeyListSchema).parse((await call('GET', '/api/v1/keys', jwt)).body);
      assert.equal(list.data.keys.filter((k) => k.status === 'active').length, 5);
    });

    test("another user's key is 404; bad key_id is 400; an API key cannot manage keys", async () => {
      const a = await h.idp.token('user-a');
      const b = await h.idp.token('user-b');
      const ka = await newKey(a);
      const r = await call('POST', '/api/v1/keys/revoke', b, { key_id: ka.id });
      assert.equal(r.status, 404);
      assert.equal(r.body.error.code, 'NOT_FOUND');
      assert.equal((await call('POST', '/api/v1/keys/revoke', a, { key_id: 'not-a-uuid' })).status, 400);
      assert.equal((await call('POST', '/api/v1/keys/revoke', a, {})).body.error.code, 'INVALID_PARAMETER');
      assert.equal((await call('POST', '/api/v1/keys/create', a, { name: 'x'.repeat(65) })).status, 400);
      assert.equal((await call('GET', '/api/v1/keys', ka.key)).status, 401);
      // Still active: b could not revoke it.
      assert.equal((await call('GET', '/api/v1/assets', ka.key)).status, 200);
    });

    test('POST /keys/create without a body (and no Content-Type) creates a key named default', async () => {
      const jwt = await h.jwt('user-no-body');
      const r = await call('POST', '/api/v1/keys/create', jwt);
      assert.equal(r.status, 201, r.raw);
      const listed = okEnvelope(KeyListSchema).parse((await call('GET', '/api/v1/keys', jwt)).body).data.keys;
      assert.deepEqual(
        listed.map((k) => k.name),
        ['default'],
      );
      // An empty body that claims to be JSON is still refused, saying what to send.
      const empty = await h.request('POST', '/api/v1/keys/create', { token: jwt, headers: { 'content-type': 'application/json' } });
      expectError(empty, 400, 'INVALID_PARAMETER');
      assert.match(empty.body.error.message, /send a JSON object/);
    });

    test('bad bodies are 400 INVALID_PARAMETER naming the field', async () => {
      const jwt = await h.jwt('user-bad-body');
      const name = await call('POST', '/api/v1/keys/create', jwt, { name: 'x'.repeat(65) });
      expectError(name, 400, 'INVALID_PARAMETER');
      assert.match(name.body.error.message, /name/);
      const extra = await call('POST', '/api/v1/keys/create', jwt, { name: 'ok', tier: 'api' });
      expectError(extra, 400, 'INVALID_PARAMETER');
      assert.match(extra.body.error.message, /tier/);
      const id = await call('POST', '/api/v1/keys/revoke', jwt, { key_id: 'not-a-uuid' });
      expectError(id, 400, 'INVALID_PARAMETER');
      assert.match(id.body.error.message, /^Invalid body field 'key_id': must be the id of a key, a UUID from GET \/api\/v1\/keys$/);
      const none = await call('POST', '/api/v1/keys/revoke', jwt, {});
      assert.match(none.body.error.message, /^Invalid body field 'key_id': required: the id of the key to revoke/);
      // The key itself instead of its id: told so, and the key is not echoed.
      const full = (await h.createKey(jwt, 'pasted')).key;
      const pasted = await call('POST', '/api/v1/keys/revoke', jwt, { key_id: full });
      expectError(pasted, 400, 'INVALID_PARAMETER');
      assert.match(pasted.body.error.message, /this is the key itself: give its id instead/);
      assert.ok(!JSON.stringify(pasted.body).includes(full.slice(9)), 'the key is not echoed');
      // An unknown (well-formed) id is 404, as another user's.
      expectError(await call('POST', '/api/v1/keys/revoke', jwt, { key_id: '00000000-0000-4000-8000-000000000000' }), 404, 'NOT_FOUND');
    });
  });

  describe('security', () => {
    runSharedSecurityTests(harness, { name: 'GET /keys', method: 'GET', path: () => '/api/v1/keys', policy: 'user' });
    runSharedSecurityTests(harness, {
      name: 'POST /keys/create',
      method: 'POST',
      path: () => '/api/v1/keys/create',
      body: () => ({}),
      policy: 'user',
    });
    runSharedSecurityTests(harness, {
      name: 'POST /keys/revoke',
      method: 'POST',
      path: () => '/api/v1/keys/revoke',
      body: (c) => ({ key_id: c.ownerKeyId }),
      policy: 'user',
      ownerScoped: true,
    });
  });
});
