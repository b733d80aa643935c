import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { sql } from 'drizzle-orm';
import type { Service } from '../../src/server.ts';
import { checksum, hashKey, KEY_PREFIX } from '../../src/auth/api-keys.ts';
import { okEnvelope } from '../../src/http/envelope.ts';
import { CreatedKeySchema } from '../../src/services/schemas/keys.ts';
import type { TestIdp } from '../helpers/idp.ts';
import { expectError, harnessUnavailable, startHarness, testDatabase, type Harness } from '../helpers/harness.ts';

/**
 * Cross-cutting behaviour of the HTTP service, not of one resource: the error envelope for
 * malformed requests, unknown routes and unexpected exceptions, the OpenAPI document and the
 * API reference, the probes, JWT attacks, rate limits, and secrets in the database and logs.
 */

const DATABASE = testDatabase();
const SKIP = (await harnessUnavailable({ database: DATABASE })) ?? undefined;
let harness: Harness;
let idp: TestIdp;
let svc: Service;
let app: FastifyInstance;
let logLines: string[];
let proKey = '';

/** A fresh client address per call, so per-IP limits of one test do not touch another. */
const freshIp = () => harness.freshIp();

async function call(method: string, url: string, token?: string, body?: unknown, ip = freshIp()) {
  return harness.request(method, url, { token, body, ip });
}

/** GETs as a new unauthenticated client (its own IP), so the 5/minute unauthenticated limit does not interfere. */
async function get(url: string) {
  return harness.request('GET', url);
}

async function newKey(jwt: string): Promise<{ id: string; key: string }> {
  const r = await call('POST', '/api/v1/keys/create', jwt, { name: 'test' });
  assert.equal(r.status, 201, r.raw);
  return okEnvelope(CreatedKeySchema).parse(r.body).data;
}

before(async () => {
  if (SKIP) return;
  harness = await startHarness({
    database: DATABASE,
    config: { LOG_LEVEL: 'info', USAGE_FLUSH_MS: '100' },
    captureLogs: true,
    beforeReady: (a) => {
      a.get('/api/v1/__boom', async () => {
        throw new Error('secret internal detail at /srv/db.ts:42');
      });
    },
  });
  ({ idp, svc, app, logs: logLines } = harness);
  proKey = (await harness.keyFor('pro', 'contract-pro')).key;
});
after(async () => harness?.stop());

describe('errors, docs and probes', { skip: SKIP }, () => {
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

  test('every answer says X-Content-Type-Options: nosniff (JSON, errors before routing, MCP, pages)', async () => {
    const answers = await Promise.all(
      [
        { url: '/api/v1/signals' },
        { url: '/api/v1/chain-health/%E0%A4%A' },
        { url: '/api/v1/nope' },
        { url: '/api/v1/keys', headers: { authorization: 'Bearer svc_live_nope' } },
        { url: '/mcp', method: 'POST' as const, payload: { jsonrpc: '2.0', id: 1, method: 'ping' } },
        { url: '/' },
      ].map((r, i) => app.inject({ method: 'GET', ...r, remoteAddress: `10.0.201.${i + 1}` })),
    );
    for (const r of answers) assert.equal(r.headers['x-content-type-options'], 'nosniff', `${r.statusCode} ${r.body.slice(0, 80)}`);
  });

  test('unknown route is a 404 in the envelope', async () => {
    const r = await get('/api/v1/nope');
    expectError(r, 404, 'NOT_FOUND');
    expectError(await get('/nothing/here'), 404, 'NOT_FOUND');
  });

  test('a route asked with a method it does not take is a 404 that names the methods it takes (and Allow)', async () => {
    for (const [method, url, takes] of [
      ['POST', '/api/v1/regime', ['GET']],
      ['DELETE', '/api/v1/signals', ['GET']],
      ['POST', '/api/v1/keys', ['GET']],
      ['PUT', '/api/v1/thesis/01a22592-e455-70bd-aeb9-182242be176f', ['GET', 'DELETE']],
    ] as const) {
      const r = await call(method, url, proKey);
      expectError(r, 404, 'NOT_FOUND');
      assert.equal(
        r.body.error.message,
        `Route ${method} ${url} not found: this path takes ${takes.join(' or ')}, not ${method} (the API reference at /docs lists every route and its methods)`,
      );
      // HEAD is answered wherever GET is, so Allow names it too.
      assert.equal(r.headers.allow, takes.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', '));
      if (takes.includes('GET')) assert.equal((await call('HEAD', url, proKey)).headers.allow, undefined, `HEAD ${url} is routed`);
    }
    // A path no method takes keeps the plain message, without Allow.
    const none = await call('POST', '/api/v1/nope', proKey);
    expectError(none, 404, 'NOT_FOUND');
    assert.equal(
      none.body.error.message,
      'Route POST /api/v1/nope not found: the API reference at /docs lists every route and its methods',
    );
    assert.equal(none.headers.allow, undefined);
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
    for (const p of [
      '/api/v1/signals',
      '/api/v1/signals/{asset}',
      '/api/v1/regime',
      '/api/v1/chain-health',
      '/api/v1/chain-health/{asset}',
      '/api/v1/chain-metrics/{asset}',
      '/api/v1/assets',
      '/api/v1/signal-history/{asset}',
    ]) {
      assert.ok(r.body.paths[p]?.get, p);
    }
    const days = r.body.paths['/api/v1/signal-history/{asset}'].get.parameters.find((p: any) => p.name === 'days');
    assert.equal(days.schema.maximum, 365);
    // Conditional GET is documented where the service does it: market data, not keys or theses.
    const signals = r.body.paths['/api/v1/signals'].get;
    assert.ok(signals.parameters.some((p: any) => p.$ref === '#/components/parameters/IfNoneMatch'));
    assert.equal(r.body.components.parameters.IfNoneMatch.in, 'header');
    assert.deepEqual(signals.responses['304'], { $ref: '#/components/responses/NotModified' });
    assert.deepEqual(r.body.components.responses.NotModified.headers.ETag, { $ref: '#/components/headers/ETag' });
    assert.ok(signals.responses['200'].headers.ETag && signals.responses['200'].headers['Cache-Control']);
    const keys = r.body.paths['/api/v1/keys'].get;
    assert.equal(keys.responses['304'], undefined);
    assert.equal(keys.responses['200'].headers.ETag, undefined);
    assert.ok(keys.responses['200'].headers['Cache-Control']);
    // And it is what the service does.
    const first = await app.inject({ method: 'GET', url: '/api/v1/signals' });
    const again = await app.inject({ method: 'GET', url: '/api/v1/signals', headers: { 'if-none-match': String(first.headers.etag) } });
    assert.equal(again.statusCode, 304);
  });

  test('/docs serves the API reference from local files (no CDN), with a viewport for phones', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs/' });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /swagger-ui/i);
    assert.doesNotMatch(res.body, /https?:\/\/(?!localhost)[a-z0-9.-]+\/.*\.(js|css)/i);
    // Readable on a phone: the page declares its viewport (once) and says what it documents.
    assert.equal(res.body.match(/<meta name="viewport" content="width=device-width, initial-scale=1">/g)?.length, 1);
    assert.match(res.body, /<title>Market Intelligence API: reference<\/title>/);
    const init = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    assert.equal(init.statusCode, 200);
    // Framing, sniffing and script protection like the dashboard's pages (the page renders under it: test/web).
    for (const r of [res, init]) {
      assert.match(String(r.headers['content-security-policy']), /^default-src 'none'; script-src 'self';/);
      assert.doesNotMatch(String(r.headers['content-security-policy']), /upgrade-insecure-requests/);
      assert.equal(r.headers['x-frame-options'], 'DENY');
      assert.equal(r.headers['x-content-type-options'], 'nosniff');
    }
  });

  test('/healthz and /readyz', async () => {
    assert.equal((await get('/healthz')).status, 200);
    const r = await get('/readyz');
    assert.equal(r.status, 200);
    assert.equal(r.body.checks.database, true);
  });
});

describe('JWT attacks are refused with 401', { skip: SKIP }, () => {
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

describe('rate limits', { skip: SKIP }, () => {
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

  test('IPv6: an address is counted by its /64 (rotating within it gains nothing); ::ffff:a.b.c.d counts as a.b.c.d', async () => {
    const net = `2001:db8:${(Date.now() % 0xffff).toString(16)}:7`;
    const codes: number[] = [];
    for (let i = 1; i <= 6; i++)
      codes.push((await call('GET', '/api/v1/assets', undefined, undefined, `${net}::${i.toString(16)}`)).status);
    assert.deepEqual(codes, [200, 200, 200, 200, 200, 429]);
    // Another /64 has its own count.
    assert.equal((await call('GET', '/api/v1/assets', undefined, undefined, `${net}0::1`)).status, 200);
    // The failed-authentication budget too: 21 bad keys from 21 addresses of one /64.
    const other = `2001:db8:${(Date.now() % 0xffff).toString(16)}:8`;
    const failed: number[] = [];
    for (let i = 1; i <= 21; i++)
      failed.push((await call('GET', '/api/v1/assets', 'svc_live_bad', undefined, `${other}:${i.toString(16)}::1`)).status);
    assert.deepEqual(failed, [...Array<number>(20).fill(401), 429]);
    const v4 = freshIp();
    for (let i = 0; i < 5; i++) await call('GET', '/api/v1/assets', undefined, undefined, i % 2 ? `::ffff:${v4}` : v4);
    expectError(await call('GET', '/api/v1/assets', undefined, undefined, `::ffff:${v4}`), 429, 'RATE_LIMITED');
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
    assert.equal(blocked.body.error.details.scope, 'address');
    assert.equal(blocked.body.error.details.limit, 20);
    assert.match(blocked.body.error.message, /failed authentication/);
    assert.ok(Number(blocked.headers['retry-after']) >= 1);
    // Another address is not affected.
    assert.equal((await call('GET', '/api/v1/assets', wellFormed)).status, 401);
  });

  test("a JWT on thesis routes counts against the user's tier quota; key management has its own per-user budget, with headers", async () => {
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

describe('secrets', { skip: SKIP }, () => {
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
    const stored = (await svc.database.db.execute(sql`select key_hash from api_keys where id = ${k.id}`)) as unknown as {
      rows: { key_hash: string }[];
    };
    assert.equal(stored.rows[0]!.key_hash, hashKey(k.key));
    const logs = logLines.join('');
    assert.ok(logLines.length > 5, 'requests were logged');
    assert.ok(!logs.includes(k.key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 20)), 'key found in the logs');
    assert.ok(!logs.includes(jwt.split('.')[2]!), 'JWT found in the logs');
  });

  test('a key pasted into a path is logged by its display prefix only', async () => {
    const jwt = await idp.token('user-key-in-path', { email: 'key-in-path@example.com' });
    const k = await newKey(jwt);
    const from = logLines.length;
    // A key where an asset or a thesis id goes, and on a path that matches no route.
    expectError(await get(`/api/v1/signals/${k.key}`), 404, 'NOT_FOUND');
    expectError(await call('GET', `/api/v1/thesis/${k.key}`, k.key), 404, 'NOT_FOUND');
    expectError(await get(`/api/v1/${k.key}/signals`), 404, 'NOT_FOUND');
    const access = logLines
      .slice(from)
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('request completed'))
      .map((l) => (JSON.parse(l) as { path: string }).path);
    const shown = `${k.key.slice(0, KEY_PREFIX.length + 4)}...`;
    assert.deepEqual(access, [`/api/v1/signals/${shown}`, `/api/v1/thesis/${shown}`, `/api/v1/${shown}/signals`]);
    assert.ok(!logLines.join('').includes(k.key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 20)), 'key found in the logs');
  });

  test('a JWT pasted into a path is logged as eyJ... only (no signature, no email)', async () => {
    const jwt = await idp.token('user-jwt-in-path', { email: 'jwt-in-path@example.com' });
    const from = logLines.length;
    expectError(await get(`/api/v1/${jwt}/x`), 404, 'NOT_FOUND');
    expectError(await call('GET', `/api/v1/keys/${jwt}/revoke`, jwt), 404, 'NOT_FOUND');
    const access = logLines
      .slice(from)
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('request completed'))
      .map((l) => (JSON.parse(l) as { path: string }).path);
    assert.deepEqual(access, ['/api/v1/eyJ.../x', '/api/v1/keys/eyJ.../revoke']);
    const logs = logLines.slice(from).join('');
    assert.ok(!logs.includes(jwt.split('.')[1]!), 'JWT payload found in the logs');
    assert.ok(!logs.includes(jwt.split('.')[2]!), 'JWT signature found in the logs');
  });

  test('the access log names the key (its id, never the key) or the signed-in user, over REST and MCP', async () => {
    const jwt = await idp.token('user-access-log', { email: 'access-log@example.com' });
    const k = await newKey(jwt);
    const from = logLines.length;
    await call('GET', '/api/v1/signals/btc', k.key);
    await call('GET', '/api/v1/keys', jwt);
    const mcp = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: {
        authorization: `Bearer ${k.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        host: '127.0.0.1',
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_assets', arguments: {} } }),
    });
    assert.equal(mcp.statusCode, 200, mcp.body);
    const access = logLines
      .slice(from)
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('request completed'))
      .map((l) => JSON.parse(l) as { path: string; tier?: string; key_id?: string; user_id?: string });
    const line = (path: string) => access.find((a) => a.path === path);
    assert.deepEqual(
      [line('/api/v1/signals/btc')?.key_id, line('/api/v1/signals/btc')?.tier, line('/api/v1/signals/btc')?.user_id],
      [k.id, 'free', undefined],
    );
    assert.equal(line('/api/v1/keys')?.user_id, 'user-access-log');
    assert.equal(line('/api/v1/keys')?.key_id, undefined);
    assert.deepEqual([line('/mcp')?.key_id, line('/mcp')?.tier], [k.id, 'free']);
  });
});
