import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { base64url, createLocalJWKSet, exportJWK, exportSPKI, generateKeyPair, importJWK, SignJWT } from 'jose';
import { localJwks } from '../../src/auth/identity.ts';
import { AuthError, createJwtVerifier, IDP_RETRY_MS, IdentityProviderUnavailableError } from '../../src/auth/jwt.ts';
import type { JwtCheck } from '../../src/auth/jwt.ts';
import { startTestIdp, type TestIdp } from '../helpers/idp.ts';

// createJwtVerifier against a loopback OIDC-style IdP (discovery + JWKS, RS256): what it
// accepts, and every way a token must be refused.

let idp: TestIdp;
let other: TestIdp;
let verifier: JwtCheck;
const now = () => Math.floor(Date.now() / 1000);

before(async () => {
  idp = await startTestIdp();
  other = await startTestIdp(); // another key pair, same kid
  verifier = createJwtVerifier({ issuer: idp.issuer, audience: idp.audience });
});

after(async () => {
  await idp?.close();
  await other?.close();
});

/** Asserts `token` is refused with an AuthError whose message does not leak the token. */
async function refused(token: string, v: JwtCheck = verifier): Promise<void> {
  await assert.rejects(v.verify(token), (err: unknown) => {
    assert.ok(err instanceof AuthError, `expected AuthError, got ${String(err)}`);
    if (token.length > 0)
      assert.ok(
        !err.message.includes(token) && !err.message.includes(token.split('.')[1] || token),
        'the message never contains the token',
      );
    return true;
  });
}

function encode(obj: unknown): string {
  return base64url.encode(JSON.stringify(obj));
}

function claims(sub = 'user-1'): Record<string, unknown> {
  return { sub, email: `${sub}@example.com`, iss: idp.issuer, aud: idp.audience, iat: now(), exp: now() + 600 };
}

test('accepts a valid token found by discovery and returns sub, email and sid (null without the claim)', async () => {
  assert.deepEqual(await verifier.verify(await idp.token('user-1')), { sub: 'user-1', email: 'user-1@example.com', sid: null });
  assert.equal((await verifier.verify(await idp.token('user-1', { sid: 'session-7' }))).sid, 'session-7');
  // exp within the 5 s clock tolerance still passes
  assert.equal((await verifier.verify(await idp.token('user-2', { exp: now() - 2 }))).sub, 'user-2');
});

test('refuses a wrong issuer', async () => {
  await refused(await idp.token('u', { iss: 'https://evil.example' }));
  await refused(await idp.token('u', { iss: `${idp.issuer}/` }));
});

test('refuses a wrong audience', async () => {
  await refused(await idp.token('u', { aud: 'another-api' }));
});

test('refuses an expired token', async () => {
  await refused(await idp.token('u', { exp: now() - 60 }));
});

test('refuses a token not valid yet (nbf in the future)', async () => {
  await refused(await idp.token('u', { nbf: now() + 60 }));
});

test('refuses a token without exp', async () => {
  await refused(await idp.token('u', { exp: null }));
});

test('refuses alg none (unsigned)', async () => {
  await refused(`${encode({ alg: 'none', typ: 'JWT' })}.${encode(claims())}.`);
  await refused(`${encode({ alg: 'none', kid: 'test-key-1' })}.${encode(claims())}.`);
});

test('refuses HS256 signed with the public key as the HMAC secret (algorithm confusion)', async () => {
  const pem = await exportSPKI((await importJWK(idp.publicJwk, 'RS256', { extractable: true })) as CryptoKey);
  for (const secret of [pem, JSON.stringify(idp.publicJwk), idp.publicJwk.n!]) {
    const token = await new SignJWT(claims())
      .setProtectedHeader({ alg: 'HS256', kid: 'test-key-1' })
      .sign(new TextEncoder().encode(secret));
    await refused(token);
  }
});

test('refuses an unknown kid', async () => {
  await refused(await idp.token('u', { kid: 'unknown-key' }));
});

test('refuses a token signed by another key under the same kid', async () => {
  await refused(await other.token('u', { iss: idp.issuer }));
});

test('refuses a tampered payload (signature no longer matches)', async () => {
  const [h, , s] = (await idp.token('user-1')).split('.');
  await refused(`${h}.${encode({ ...claims('admin'), email: 'admin@example.com' })}.${s}`);
  // and garbage
  await refused('not-a-jwt');
  await refused('');
});

test('refuses tokens whose sub is missing or not a string', async () => {
  // The test IdP always sets a string sub: use a local key set to sign the odd cases.
  const pair = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k', alg: 'ES256' };
  const v = createJwtVerifier({ issuer: 'https://issuer.test', audience: 'api', jwks: createLocalJWKSet({ keys: [jwk] }) });
  const sign = (payload: Record<string, unknown>) =>
    new SignJWT(payload)
      .setProtectedHeader({ alg: 'ES256', kid: 'k' })
      .setIssuer('https://issuer.test')
      .setAudience('api')
      .setExpirationTime('5m')
      .sign(pair.privateKey);
  assert.equal((await v.verify(await sign({ sub: 'ok' }))).email, null);
  // An address the provider says it has not verified is not taken as the user's email.
  assert.equal((await v.verify(await sign({ sub: 'ok', email: 'alice@corp.example', email_verified: false }))).email, null);
  assert.equal((await v.verify(await sign({ sub: 'ok', email: 'alice@corp.example', email_verified: true }))).email, 'alice@corp.example');
  // The claim as a string (AWS Cognito), or another value: only "true" counts as verified.
  assert.equal((await v.verify(await sign({ sub: 'ok', email: 'alice@corp.example', email_verified: 'false' }))).email, null);
  assert.equal((await v.verify(await sign({ sub: 'ok', email: 'alice@corp.example', email_verified: 0 }))).email, null);
  assert.equal(
    (await v.verify(await sign({ sub: 'ok', email: 'alice@corp.example', email_verified: 'true' }))).email,
    'alice@corp.example',
  );
  assert.equal((await v.verify(await sign({ sub: 'ok', email: 'alice@corp.example' }))).email, 'alice@corp.example');
  await refused(await sign({}), v);
  await refused(await sign({ sub: 42 }), v);
  await refused(await sign({ sub: '' }), v);
});

test('refuses everything when discovery fails or the discovered issuer differs', async () => {
  // Discovery document announces a different issuer than configured (trailing slash).
  await refused(await idp.token('u'), createJwtVerifier({ issuer: `${idp.issuer}/`, audience: idp.audience }));
  // Unreachable issuer.
  const dead = createJwtVerifier({ issuer: 'http://127.0.0.1:9', audience: idp.audience });
  await refused(await idp.token('u'), dead);
  await refused(await idp.token('u'), dead);
});

test('a failed discovery is retried on the next call (retryMs 0)', async () => {
  // An issuer whose discovery answers 503 once, then a document pointing at the test IdP's JWKS.
  let calls = 0;
  const server = http.createServer((_req, res) => {
    calls++;
    if (calls === 1) {
      res.statusCode = 503;
      res.end();
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ issuer, jwks_uri: `${idp.issuer}/jwks` }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const v = createJwtVerifier({ issuer, audience: idp.audience, retryMs: 0 });
    const token = await idp.token('user-9', { iss: issuer });
    await refused(token, v);
    assert.equal((await v.verify(token)).sub, 'user-9');
    assert.equal((await v.verify(token)).sub, 'user-9');
    assert.equal(calls, 2, 'discovery is cached once it succeeded');
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
});

test('a JWKS read in process that fails (the database down) is "unavailable", not an invalid token; it reads again later', async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
  let down = true;
  const v = createJwtVerifier({
    issuer: 'https://issuer.test',
    audience: 'api',
    jwks: localJwks(
      async () => {
        if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        return { keys: [jwk] };
      },
      { minReloadMs: 0 },
    ),
  });
  const token = await new SignJWT({ sub: 'u1' })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuer('https://issuer.test')
    .setAudience('api')
    .setExpirationTime('5m')
    .sign(privateKey);
  await assert.rejects(v.verify(token), (e: unknown) => e instanceof IdentityProviderUnavailableError);
  down = false;
  assert.equal((await v.verify(token)).sub, 'u1');
});

/**
 * An issuer whose discovery points at its own JWKS, which answers as `mode` says: the test
 * IdP's key (`ok`), HTTP 500, a body that is not JSON, or JSON that is not a JWKS.
 */
async function flakyIssuer(): Promise<{
  issuer: string;
  mode: { jwks: string; issuer?: string };
  hits: { jwks: number };
  close(): Promise<void>;
}> {
  const mode: { jwks: string; issuer?: string } = { jwks: 'ok' };
  const hits = { jwks: 0 };
  let issuer = '';
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') {
      res.end(JSON.stringify({ issuer: mode.issuer ?? issuer, jwks_uri: `${issuer}/jwks` }));
      return;
    }
    hits.jwks++;
    if (mode.jwks === '500') {
      res.statusCode = 500;
      res.end('{"error":"oops"}');
    } else if (mode.jwks === 'html') res.end('<html>maintenance</html>');
    else if (mode.jwks === 'not-jwks') res.end('{"hello":"world"}');
    else res.end(JSON.stringify({ keys: [idp.publicJwk] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { issuer, mode, hits, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('a JWKS that answers 500, a body that is not JSON or JSON that is not a JWKS is "unavailable" (503), not an invalid token; then it recovers', async () => {
  const f = await flakyIssuer();
  try {
    for (const [mode, why] of [
      ['500', /HTTP 500/],
      ['html', /not JSON/],
      ['not-jwks', /not a JWKS/],
    ] as const) {
      f.mode.jwks = mode;
      const v = createJwtVerifier({ issuer: f.issuer, audience: idp.audience, retryMs: 0 });
      const token = await idp.token('user-5', { iss: f.issuer });
      await assert.rejects(v.verify(token), (e: unknown) => {
        assert.ok(e instanceof IdentityProviderUnavailableError, `${mode}: expected unavailable, got ${String(e)}`);
        // For the log: which document and why; never the token.
        assert.match(e.message, /JWKS/);
        assert.match(e.message, why);
        assert.ok(!e.message.includes(token.split('.')[1]!));
        return true;
      });
      f.mode.jwks = 'ok';
      assert.equal((await v.verify(token)).sub, 'user-5', `${mode}: recovers once the JWKS answers`);
    }
  } finally {
    await f.close();
  }
});

test('after a failed JWKS fetch the provider is not asked again for retryMs, whatever the traffic', async () => {
  const f = await flakyIssuer();
  try {
    f.mode.jwks = '500';
    const v = createJwtVerifier({ issuer: f.issuer, audience: idp.audience, retryMs: 300 });
    const token = await idp.token('user-6', { iss: f.issuer });
    for (let i = 0; i < 20; i++) await assert.rejects(v.verify(token), (e: unknown) => e instanceof IdentityProviderUnavailableError);
    assert.equal(f.hits.jwks, 1, 'one JWKS request for 20 tokens within retryMs');
    f.mode.jwks = 'ok';
    await assert.rejects(v.verify(token), (e: unknown) => e instanceof IdentityProviderUnavailableError);
    await new Promise((r) => setTimeout(r, 350));
    assert.equal((await v.verify(token)).sub, 'user-6');
    assert.equal(f.hits.jwks, 2);
    assert.equal(IDP_RETRY_MS, 5000);
  } finally {
    await f.close();
  }
});

test('a discovery document with another issuer is "unavailable", and the message names both issuers', async () => {
  const f = await flakyIssuer();
  try {
    // The usual mistake: AUTH_ISSUER without the trailing slash the provider's issuer has.
    f.mode.issuer = `${f.issuer}/`;
    const v = createJwtVerifier({ issuer: f.issuer, audience: idp.audience });
    await assert.rejects(v.verify(await idp.token('u', { iss: f.issuer })), (e: unknown) => {
      assert.ok(e instanceof IdentityProviderUnavailableError);
      assert.ok(e.message.includes(`"${f.issuer}/"`) && e.message.includes(`AUTH_ISSUER "${f.issuer}"`), e.message);
      return true;
    });
  } finally {
    await f.close();
  }
});
