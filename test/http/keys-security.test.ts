import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { sql } from 'drizzle-orm';
import { createService, type Service } from '../../src/server.ts';
import { checksum, hashKey, KEY_PREFIX } from '../../src/auth/api-keys.ts';
import { okEnvelope, ErrorEnvelopeSchema } from '../../src/http/envelope.ts';
import { CreatedKeySchema, KeyListSchema } from '../../src/services/schemas/keys.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';
import { testConfig } from '../helpers/env.ts';

let idp: TestIdp;
let svc: Service;
let app: FastifyInstance;
const logLines: string[] = [];
let ipSeq = 0;
/** A fresh client address per call, so per-IP limits of one test do not touch another. */
const freshIp = () => `10.9.${Math.floor(++ipSeq / 250)}.${ipSeq % 250}`;

async function call(method: string, url: string, token?: string, body?: unknown, ip = freshIp()) {
  const res = await app.inject({
    method: method as 'GET',
    url,
    remoteAddress: ip,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    payload: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: res.json() as any, raw: res.body };
}

async function newKey(jwt: string): Promise<{ id: string; key: string }> {
  const r = await call('POST', '/api/v1/keys/create', jwt, { name: 'test' });
  assert.equal(r.status, 201, r.raw);
  return okEnvelope(CreatedKeySchema).parse(r.body).data;
}

before(async () => {
  idp = await startTestIdp();
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(chunk.toString());
      cb();
    },
  });
  svc = await createService(testConfig({ AUTH_ISSUER: idp.issuer, LOG_LEVEL: 'info', USAGE_FLUSH_MS: '100' }), { logStream });
  app = svc.app;
  await app.ready();
});
after(async () => {
  await svc?.stop();
  await idp?.close();
});

describe('API keys', () => {
  test('create shows the key once in the svc_live_ format; list never shows it', async () => {
    const jwt = await idp.token('user-create', { email: 'create@example.com' });
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

  test('20 concurrent creations for one user leave exactly 5 active keys', async () => {
    const jwt = await idp.token('user-race');
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

  test('revoke is idempotent, frees a slot, and is refused at once; usage is counted', async () => {
    const jwt = await idp.token('user-revoke');
    const k = await newKey(jwt);
    for (let i = 0; i < 3; i++) assert.equal((await call('GET', '/api/v1/assets', k.key)).status, 200);
    await svc.usage.flush();
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

  test("another user's key is 404; bad key_id is 400; an API key cannot manage keys", async () => {
    const a = await idp.token('user-a');
    const b = await idp.token('user-b');
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

  test('tier comes from the user plan; pro keys read signal history', async () => {
    const jwt = await idp.token('user-pro', { email: 'pro@example.com' });
    const k = await newKey(jwt);
    assert.equal((await call('GET', '/api/v1/signal-history/bitcoin', k.key)).status, 403);
    assert.equal(await svc.keys.setTier('PRO@example.com', 'pro'), 1);
    const r = await call('GET', '/api/v1/signal-history/bitcoin', k.key);
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-service-tier'], 'pro');
    assert.equal(r.headers['x-ratelimit-limit'], '5000');
  });
});

/** Every protected route, with how to call it and (when it has one) another user's object. */
describe('shared security suite on every protected route', async () => {
  const routes: { name: string; method: string; url: (ctx: Ctx) => string; body?: (ctx: Ctx) => unknown; auth: 'key' | 'jwt' | 'user'; tierGated?: boolean; owned?: boolean }[] = [
    { name: 'GET /signal-history/{asset}', method: 'GET', url: () => '/api/v1/signal-history/bitcoin', auth: 'key', tierGated: true },
    { name: 'GET /thesis/{id}/health', method: 'GET', url: (c) => `/api/v1/thesis/${c.thesisId}/health`, auth: 'user', owned: true },
    { name: 'GET /thesis/{id}', method: 'GET', url: (c) => `/api/v1/thesis/${c.thesisId}`, auth: 'user', owned: true },
    { name: 'DELETE /thesis/{id}', method: 'DELETE', url: (c) => `/api/v1/thesis/${c.thesisId}`, auth: 'user', owned: true },
    { name: 'GET /thesis', method: 'GET', url: () => '/api/v1/thesis', auth: 'user' },
    { name: 'POST /thesis', method: 'POST', url: () => '/api/v1/thesis', body: () => ({ asset: 'bitcoin', direction: 'long', title: 't', conditions: [] }), auth: 'user' },
    { name: 'GET /keys', method: 'GET', url: () => '/api/v1/keys', auth: 'jwt' },
    { name: 'POST /keys/create', method: 'POST', url: () => '/api/v1/keys/create', body: () => ({}), auth: 'jwt' },
    { name: 'POST /keys/revoke', method: 'POST', url: (c) => '/api/v1/keys/revoke', body: (c) => ({ key_id: c.ownerKeyId }), auth: 'jwt', owned: true },
  ];
  interface Ctx {
    ownerJwt: string;
    ownerKey: string;
    ownerKeyId: string;
    otherJwt: string;
    otherKey: string;
    revokedKey: string;
    thesisId: string;
  }
  let ctx: Ctx;
  before(async () => {
    const ownerJwt = await idp.token('sec-owner', { email: 'sec-owner@example.com' });
    const otherJwt = await idp.token('sec-other', { email: 'sec-other@example.com' });
    const owner = await newKey(ownerJwt);
    const other = await newKey(otherJwt);
    const revoked = await newKey(ownerJwt);
    await call('POST', '/api/v1/keys/revoke', ownerJwt, { key_id: revoked.id });
    const t = await call('POST', '/api/v1/thesis', owner.key, { asset: 'bitcoin', direction: 'long', title: 'BTC up', conditions: [] });
    assert.equal(t.status, 201, t.raw);
    ctx = { ownerJwt, ownerKey: owner.key, ownerKeyId: owner.id, otherJwt, otherKey: other.key, revokedKey: revoked.key, thesisId: t.body.data.id };
  });

  const random = 'A'.repeat(32);
  const cases: [string, (c: Ctx) => string | undefined][] = [
    ['no credential', () => undefined],
    ['malformed key', () => 'svc_live_short'],
    ['bad checksum', () => `${KEY_PREFIX}${random}000000`],
    ['unknown key', () => `${KEY_PREFIX}${random}${checksum(random)}`],
    ['revoked key', (c) => c.revokedKey],
    ['garbage bearer', () => 'not-a-token'],
  ];
  for (const r of routes) {
    for (const [what, tok] of cases) {
      test(`${r.name}: ${what} -> 401`, async () => {
        const res = await call(r.method, r.url(ctx), tok(ctx), r.body?.(ctx));
        assert.equal(res.status, 401, res.raw);
        ErrorEnvelopeSchema.parse(res.body);
        assert.equal(res.body.error.code, 'UNAUTHORIZED');
        assert.match(String(res.headers['www-authenticate']), /^Bearer/);
        assert.equal(res.headers['x-service-tier'], 'unauthenticated');
      });
    }
    if (r.auth === 'jwt') {
      test(`${r.name}: an API key instead of a JWT -> 401`, async () => {
        assert.equal((await call(r.method, r.url(ctx), ctx.ownerKey, r.body?.(ctx))).status, 401);
      });
    }
    if (r.tierGated) {
      test(`${r.name}: wrong tier -> 403 TIER_REQUIRED naming the tiers`, async () => {
        const res = await call(r.method, r.url(ctx), ctx.ownerKey);
        assert.equal(res.status, 403);
        assert.equal(res.body.error.code, 'TIER_REQUIRED');
        assert.deepEqual(res.body.error.details.required_tiers, ['pro', 'api']);
        assert.match(res.body.error.message, /pro or api/);
        assert.equal(res.headers['x-service-tier'], 'free');
      });
    }
    if (r.owned) {
      test(`${r.name}: another user's object -> 404`, async () => {
        const cred = r.auth === 'jwt' ? ctx.otherJwt : ctx.otherKey;
        const res = await call(r.method, r.url(ctx), cred, r.body?.(ctx));
        assert.equal(res.status, 404, res.raw);
        assert.equal(res.body.error.code, 'NOT_FOUND');
      });
    }
  }

  test('public routes: a present but invalid key is 401, never a silent downgrade', async () => {
    for (const u of ['/api/v1/signals', '/api/v1/regime', '/api/v1/assets', '/api/v1/chain-health', '/api/v1/chain-metrics/eth']) {
      for (const [, tok] of cases.slice(1)) {
        assert.equal((await call('GET', u, tok(ctx))).status, 401, u);
      }
      assert.equal((await call('GET', u, ctx.ownerJwt)).status, 401, `${u} with a JWT`);
    }
  });
});

describe('JWT attacks are refused with 401', () => {
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  test('alg none, HS256 with the public key, wrong iss/aud, expired, nbf future, unknown kid, tampered payload', async () => {
    const now = Math.floor(Date.now() / 1000);
    const good = await idp.token('jwt-user');
    assert.equal((await call('GET', '/api/v1/keys', good)).status, 200);
    const [h, p, s] = good.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const { createHmac } = await import('node:crypto');
    const hsHeader = b64({ alg: 'HS256', kid: 'test-key-1' });
    const hsSig = createHmac('sha256', JSON.stringify(idp.publicJwk)).update(`${hsHeader}.${p}`).digest('base64url');
    const attacks: Record<string, string> = {
      'alg none': `${b64({ alg: 'none' })}.${p}.`,
      'HS256 with public key': `${hsHeader}.${p}.${hsSig}`,
      'wrong iss': await idp.token('jwt-user', { iss: 'https://evil.example.com' }),
      'wrong aud': await idp.token('jwt-user', { aud: 'another-api' }),
      expired: await idp.token('jwt-user', { exp: now - 3600 }),
      'nbf in the future': await idp.token('jwt-user', { nbf: now + 3600 }),
      'unknown kid': await idp.token('jwt-user', { kid: 'other-key' }),
      'tampered payload': `${h}.${b64({ ...payload, sub: 'someone-else' })}.${s}`,
    };
    for (const [name, tok] of Object.entries(attacks)) {
      const r = await call('GET', '/api/v1/keys', tok);
      assert.equal(r.status, 401, name);
      assert.equal(r.body.error.code, 'UNAUTHORIZED', name);
    }
  });
});

describe('rate limits', () => {
  test('unauthenticated: 5 per minute per IP, then 429 with Retry-After and the window; headers on every response', async () => {
    const ip = freshIp();
    const codes: number[] = [];
    let last: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 7; i++) {
      last = await call('GET', '/api/v1/assets', undefined, undefined, ip);
      codes.push(last.status);
      assert.equal(last.headers['x-service-tier'], 'unauthenticated');
      assert.equal(last.headers['x-ratelimit-limit'], '10');
      assert.match(String(last.headers['x-ratelimit-reset']), /^\d{4}-\d{2}-\d{2}T00:00:00\.000Z$/);
      assert.match(String(last.headers['ratelimit-policy']), /"minute";q=5;w=60, "day";q=10;w=86400/);
      assert.match(String(last.headers.ratelimit), /"minute";r=\d+;t=\d+/);
    }
    assert.deepEqual(codes, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal(last!.body.error.code, 'RATE_LIMITED');
    assert.equal(last!.body.error.details.window, 'minute');
    assert.equal(last!.body.error.details.limit, 5);
    assert.ok(Number(last!.headers['retry-after']) >= 1);
    assert.equal(last!.headers['x-ratelimit-remaining'], '5', 'refused requests consumed nothing: 5 of 10 left today');
  });

  test('401s consume no quota; failed authentications are limited per IP', async () => {
    const ip = freshIp();
    for (let i = 0; i < 3; i++) assert.equal((await call('GET', '/api/v1/assets', 'svc_live_bad', undefined, ip)).status, 401);
    const ok = await call('GET', '/api/v1/assets', undefined, undefined, ip);
    assert.equal(ok.headers['x-ratelimit-remaining'], '9');
    const codes: number[] = [];
    for (let i = 0; i < 22; i++) codes.push((await call('GET', '/api/v1/assets', 'svc_live_bad', undefined, ip)).status);
    assert.ok(codes.slice(0, 17).every((c) => c === 401));
    assert.equal(codes.at(-1), 429);
    // Once the budget is used up the address is refused before any lookup: even a well-formed
    // key with a valid checksum (which would need a database lookup to be judged) gets 429.
    const random = 'A'.repeat(32);
    const wellFormed = `${KEY_PREFIX}${random}${checksum(random)}`;
    const blocked = await call('GET', '/api/v1/assets', wellFormed, undefined, ip);
    assert.equal(blocked.status, 429);
    assert.equal(blocked.body.error.code, 'RATE_LIMITED');
    assert.ok(Number(blocked.headers['retry-after']) >= 1);
    // Another address is not affected.
    assert.equal((await call('GET', '/api/v1/assets', wellFormed)).status, 401);
  });

  test('a JWT on thesis routes counts against the user\'s tier quota; key management has its own per-user budget, with headers', async () => {
    const jwt = await idp.token('user-jwt-quota');
    const codes: number[] = [];
    for (let i = 0; i < 11; i++) codes.push((await call('GET', '/api/v1/thesis', jwt)).status);
    assert.deepEqual(codes, [...Array(10).fill(200), 429]);
    const keys = await call('GET', '/api/v1/keys', jwt);
    assert.equal(keys.status, 200);
    assert.equal(keys.headers['x-ratelimit-limit'], '30');
    assert.equal(keys.headers['x-ratelimit-remaining'], '29');
    assert.ok(keys.headers['ratelimit-policy']);
    assert.equal(keys.headers['x-service-tier'], 'free');
  });

  test('free key: 10 per minute; the 11th is 429 RATE_LIMITED', async () => {
    const jwt = await idp.token('user-free-limit');
    const k = await newKey(jwt);
    const res = await Promise.all(Array.from({ length: 15 }, () => call('GET', '/api/v1/regime', k.key)));
    assert.equal(res.filter((r) => r.status === 200).length, 10);
    assert.equal(res.filter((r) => r.status === 429).length, 5);
    for (const r of res) assert.equal(r.headers['x-service-tier'], 'free');
  });
});

describe('secrets', () => {
  test('no full key in any database row or log line', async () => {
    const jwt = await idp.token('user-secret', { email: 'secret@example.com' });
    const k = await newKey(jwt);
    await call('GET', '/api/v1/signals', k.key);
    await call('GET', '/api/v1/assets', `${k.key.slice(0, -1)}x`);
    await svc.usage.flush();
    const tables = ['api_keys', 'app_users', 'theses', 'signal_history', 'signal_snapshots', 'backfill_state'];
    for (const t of tables) {
      const res = (await svc.database.db.execute(sql.raw(`select * from ${t}`))) as unknown as { rows: unknown[] };
      const dump = JSON.stringify(res.rows);
      assert.ok(!dump.includes(k.key), `key found in ${t}`);
      assert.ok(!dump.includes(k.key.slice(KEY_PREFIX.length)), `key body found in ${t}`);
    }
    const stored = (await svc.database.db.execute(sql`select key_hash from api_keys where id = ${k.id}`)) as unknown as { rows: { key_hash: string }[] };
    assert.equal(stored.rows[0]!.key_hash, hashKey(k.key));
    const logs = logLines.join('');
    assert.ok(logLines.length > 5, 'requests were logged');
    assert.ok(!logs.includes(k.key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 20)), 'key found in the logs');
    assert.ok(!logs.includes(jwt.split('.')[2]!), 'JWT found in the logs');
  });
});
