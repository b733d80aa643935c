import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { lazyIdentity, type EmbeddedIdentity } from '../../src/auth/identity-lazy.ts';
import { IdentityProviderUnavailableError } from '../../src/auth/jwt.ts';
import { ServiceError } from '../../src/errors.ts';

/**
 * The embedded identity provider created on first use (src/auth/identity-lazy.ts): what it
 * knows without the provider, one creation for concurrent first uses, failures classified
 * (database down: 503; anything else: 500; JWTs: unavailable) and kept for `retryMs`.
 */

const log = pino({ level: 'silent' });
const real: EmbeddedIdentity = {
  issuer: 'http://127.0.0.1:3000',
  audience: 'aud',
  origin: 'http://127.0.0.1:3000',
  discovery: '{}',
  jwks: () => Promise.reject(new Error('not used')),
  handler: async () => new Response('ok', { status: 200 }),
};
const request = () => new Request('http://127.0.0.1:3000/auth/ok');

test('issuer, audience and discovery without creating it; concurrent first uses share one creation', async () => {
  let calls = 0;
  const idp = lazyIdentity({ baseUrl: 'http://127.0.0.1:3000/', audience: 'aud', log }, async () => {
    calls++;
    await new Promise((r) => setTimeout(r, 20));
    return real;
  });
  assert.equal(idp.issuer, 'http://127.0.0.1:3000');
  assert.equal(JSON.parse(idp.discovery).jwks_uri, 'http://127.0.0.1:3000/auth/jwks');
  assert.equal(calls, 0);
  const answers = await Promise.all([idp.handler(request()), idp.handler(request()), idp.warm()]);
  assert.equal(calls, 1);
  assert.equal(await (answers[0] as Response).text(), 'ok');
});

test('a failure is 503 when the database is down, 500 otherwise, JWTs unavailable; kept for retryMs, then retried', async () => {
  const outcomes: (Error | null)[] = [
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    new Error('bad install'),
    null,
  ];
  let calls = 0;
  const idp = lazyIdentity({ baseUrl: 'http://127.0.0.1:3000', audience: 'aud', log, retryMs: 80 }, async () => {
    const e = outcomes[calls++];
    if (e) throw e;
    return real;
  });
  await assert.rejects(idp.handler(request()), (e: unknown) => e instanceof ServiceError && e.code === 'SERVICE_UNAVAILABLE');
  // Within retryMs: the same failure, no new attempt.
  await assert.rejects(async () => idp.jwks({ alg: 'ES256' }, { payload: '', signature: '' } as never), IdentityProviderUnavailableError);
  assert.equal(calls, 1);
  await new Promise((r) => setTimeout(r, 100));
  await assert.rejects(idp.handler(request()), (e: unknown) => e instanceof ServiceError && e.code === 'INTERNAL_ERROR');
  assert.equal(calls, 2);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal((await idp.handler(request())).status, 200);
  assert.equal(calls, 3);
  await idp.handler(request());
  assert.equal(calls, 3, 'created once it succeeded');
});
