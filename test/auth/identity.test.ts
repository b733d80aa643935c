import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { Writable } from 'node:stream';
import { eq, sql } from 'drizzle-orm';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { AuthError, createJwtVerifier } from '../../src/auth/jwt.ts';
import { createService, type Service } from '../../src/server.ts';
import { authAccount, authUser } from '../../src/store/auth-schema.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, testConfig } from '../helpers/env.ts';

// The real service with its embedded identity provider (AUTH_ISSUER unset), in-memory PGlite,
// listening on loopback: sign up -> sign in -> JWT -> API key -> data, over HTTP.

let svc: Service;
let base: string;
const AUDIENCE = 'market-intel-api';
const EMAIL = `Alice.${Date.now()}@Example.com`;
const PASSWORD = 'correct horse battery staple';

/** A free loopback port: the issuer (public URL) must be known before the app is built. */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/**
 * A JSON POST as the sign-in page makes it. Node's fetch sends `Sec-Fetch-Mode: cors` like a
 * browser, so better-auth's CSRF check wants the page's Origin (curl sends neither: see the
 * last test).
 */
async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: base, ...headers },
    body: JSON.stringify(body),
  });
}

/** A request as curl makes it (node:http: no Origin, no Sec-Fetch-* headers). */
function curl(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      { method, headers: body ? { 'content-type': 'application/json', ...headers } : headers },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

before(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  svc = await createService(testConfig({ PORT: String(port), HOST: '127.0.0.1' }), { publicUrl: base });
  await svc.app.listen({ port, host: '127.0.0.1' });
});

after(async () => {
  await svc?.stop();
});

let userId = '';
let sessionToken = '';
let signedSessionToken = '';
let sessionCookie = '';
let jwt = '';
let madeKey = '';

test('sign-up with email + password creates the account (then sign in); a second sign-up answers alike', async () => {
  const res = await post('/auth/sign-up/email', { name: 'Alice', email: EMAIL, password: PASSWORD });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { token: string | null; user: { id: string; email: string } };
  assert.equal(body.user.email, EMAIL.toLowerCase());
  assert.equal(body.token, null, 'no session from sign-up: the client signs in');
  assert.equal(res.headers.get('set-auth-token'), null);
  userId = body.user.id;

  // The same email again: the same status and body shape (no account enumeration), no session.
  const again = await post('/auth/sign-up/email', { name: 'Alice', email: EMAIL, password: PASSWORD });
  assert.equal(again.status, 200);
  const againBody = (await again.json()) as { token: string | null; user: { id: string; email: string } };
  assert.deepEqual(Object.keys(againBody).sort(), Object.keys(body).sort());
  assert.deepEqual(Object.keys(againBody.user).sort(), Object.keys(body.user).sort());
  assert.equal(againBody.token, null);
});

test('sign-in with a wrong password is refused', async () => {
  const res = await post('/auth/sign-in/email', { email: EMAIL, password: 'not the password' });
  assert.equal(res.status, 401);
  const body = (await res.json()) as Record<string, unknown>;
  assert.equal(body.token, undefined);
  assert.equal(res.headers.get('set-auth-token'), null);
  assert.ok(!res.headers.getSetCookie().some((c) => /session_token=[^;]/.test(c)));
});

test('sign-in with the right password returns a session', async () => {
  const res = await post('/auth/sign-in/email', { email: EMAIL.toUpperCase(), password: PASSWORD });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { token: string; user: { id: string } };
  assert.equal(body.user.id, userId);
  sessionToken = body.token;
  signedSessionToken = res.headers.get('set-auth-token') ?? '';
  assert.ok(signedSessionToken);
  const cookie = res.headers.getSetCookie().find((c) => /session_token=/.test(c));
  assert.ok(cookie);
  sessionCookie = cookie.split(';')[0]!;
});

test('GET /auth/token turns the session into a 15-minute JWT for the API audience', async () => {
  const res = await fetch(`${base}/auth/token`, { headers: { authorization: `Bearer ${signedSessionToken}` } });
  assert.equal(res.status, 200);
  jwt = ((await res.json()) as { token: string }).token;
  const header = decodeProtectedHeader(jwt);
  const claims = decodeJwt(jwt);
  assert.equal(header.alg, 'ES256');
  assert.ok(header.kid);
  assert.equal(claims.iss, base);
  assert.equal(claims.aud, AUDIENCE);
  assert.equal(claims.sub, userId);
  assert.equal(claims.email, EMAIL.toLowerCase());
  assert.equal(claims.exp! - claims.iat!, 15 * 60);
  assert.equal(claims.name, undefined, 'only the claims the API needs');
  // The sign-in session's id (not its token: no credential in a JWT), for the sign-out check.
  assert.equal(typeof claims.sid, 'string');
  assert.ok(![sessionToken, signedSessionToken].includes(claims.sid as string));

  // The raw session token (bearer plugin) and the session cookie work too.
  const raw = await fetch(`${base}/auth/token`, { headers: { authorization: `Bearer ${sessionToken}` } });
  assert.equal(raw.status, 200);
  const viaCookie = await fetch(`${base}/auth/token`, { headers: { cookie: sessionCookie } });
  assert.equal(viaCookie.status, 200);
  assert.equal(decodeJwt(((await viaCookie.json()) as { token: string }).token).sub, userId);
  // get-session also hands out a JWT in set-auth-jwt.
  const session = await fetch(`${base}/auth/get-session`, { headers: { cookie: sessionCookie } });
  assert.equal(session.status, 200);
  assert.equal(decodeJwt(session.headers.get('set-auth-jwt') ?? '').sub, userId);

  // Without a session: no JWT.
  const anon = await fetch(`${base}/auth/token`);
  assert.equal(anon.status, 401);
});

test('the JWT creates an API key (201) and the key reads /api/v1/signals', async () => {
  const res = await post('/api/v1/keys/create', { name: 'from-test' }, { authorization: `Bearer ${jwt}` });
  assert.equal(res.status, 201, await res.clone().text());
  const body = (await res.json()) as { status: string; data: { key: string; name: string; tier: string } };
  assert.equal(body.status, 'ok');
  assert.equal(body.data.name, 'from-test');
  assert.equal(body.data.tier, 'free');
  assert.match(body.data.key, /^svc_live_/);

  const signals = await fetch(`${base}/api/v1/signals`, { headers: { authorization: `Bearer ${body.data.key}` } });
  assert.equal(signals.status, 200);
  assert.equal(signals.headers.get('x-service-tier') ?? 'free', 'free');
  madeKey = body.data.key;

  // The keys are the user's: listed with the same JWT.
  const list = await fetch(`${base}/api/v1/keys`, { headers: { authorization: `Bearer ${jwt}` } });
  assert.equal(list.status, 200);
  assert.equal(((await list.json()) as { data: { keys: unknown[] } }).data.keys.length, 1);
});

test('key management refuses the session token, a tampered JWT and no credential', async () => {
  for (const token of [sessionToken, signedSessionToken, `${jwt.slice(0, -4)}AAAA`]) {
    const res = await post('/api/v1/keys/create', {}, { authorization: `Bearer ${token}` });
    assert.equal(res.status, 401);
  }
  const none = await post('/api/v1/keys/create', {});
  assert.equal(none.status, 401);
  // With the embedded identity provider, the refusal says how to sign in here.
  const said = ((await none.json()) as { error: { message: string } }).error.message;
  assert.match(said, /sign in at \/signin and manage keys at \/account; with curl, POST \/auth\/sign-in\/email, then GET \/auth\/token/);
});

test('the password is stored as a scrypt hash, not in plain text', async () => {
  const rows = await svc.database.db.select().from(authAccount).where(eq(authAccount.userId, userId));
  assert.equal(rows.length, 1);
  const row = rows[0]!;
  assert.equal(row.providerId, 'credential');
  assert.ok(row.password);
  assert.ok(!row.password.includes(PASSWORD));
  assert.match(row.password, /^[0-9a-f]{32}:[0-9a-f]{128}$/, 'salt:key (hex) as better-auth stores scrypt hashes');
  const users = await svc.database.db.select().from(authUser).where(eq(authUser.id, userId));
  assert.equal(users[0]?.email, EMAIL.toLowerCase());
});

test('discovery document and JWKS are served, and a verifier finds the keys by discovery', async () => {
  const res = await fetch(`${base}/.well-known/openid-configuration`);
  assert.equal(res.status, 200);
  const doc = (await res.json()) as { issuer: string; jwks_uri: string };
  assert.equal(doc.issuer, base);
  assert.equal(doc.jwks_uri, `${base}/auth/jwks`);

  const jwksRes = await fetch(doc.jwks_uri);
  assert.equal(jwksRes.status, 200);
  const jwks = (await jwksRes.json()) as { keys: Array<Record<string, unknown>> };
  const kid = decodeProtectedHeader(jwt).kid;
  const key = jwks.keys.find((k) => k.kid === kid);
  assert.ok(key, 'the signing key is published');
  assert.equal(key.d, undefined, 'no private part');

  const verifier = createJwtVerifier({ issuer: base, audience: AUDIENCE });
  assert.deepEqual(await verifier.verify(jwt), { sub: userId, email: EMAIL.toLowerCase(), sid: decodeJwt(jwt).sid });
  await assert.rejects(createJwtVerifier({ issuer: base, audience: 'another-api' }).verify(jwt), AuthError);
});

test('pages: /signin is the dashboard page with a strict CSP; auth routes stay out of the OpenAPI document', async () => {
  const res = await fetch(`${base}/signin`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/html/);
  assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'; script-src 'self'/);
  const html = await res.text();
  assert.doesNotMatch(html, /(src|href)=["']?(https?:)?\/\//i, 'no external resources');
  assert.match(html, /"signIn":"embedded"/);
  // The page script signs up / in with JSON, gets the JWT and manages keys with it.
  const script = await (await fetch(`${base}/app/static/app.js`)).text();
  for (const used of ["'sign-in'", "'sign-up'", "'/auth/token'", "'/keys/create'", "'content-type': 'application/json'"])
    assert.ok(script.includes(used), used);

  const spec = (await (await fetch(`${base}/api/v1/openapi.json`)).json()) as { paths: Record<string, unknown> };
  assert.ok(
    !Object.keys(spec.paths).some((p) => p.startsWith('/auth') || p === '/signin' || p.startsWith('/.well-known') || p.startsWith('/app')),
  );
});

test('sign-out ends the session: no more JWTs from it, and the JWTs taken from it are refused at once', async () => {
  const keysWith = (token: string) => fetch(`${base}/api/v1/keys`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal((await keysWith(jwt)).status, 200, 'the JWT works before the sign-out');
  assert.ok(madeKey, 'a key made with this JWT earlier');
  const res = await fetch(`${base}/auth/sign-out`, { method: 'POST', headers: { cookie: sessionCookie, origin: base } });
  assert.equal(res.status, 200, await res.clone().text());
  const after = await fetch(`${base}/auth/token`, { headers: { cookie: sessionCookie } });
  assert.equal(after.status, 401);
  // The JWT has 15 minutes to run, but its session has ended.
  const refused = await keysWith(jwt);
  assert.equal(refused.status, 401);
  assert.match(refused.headers.get('www-authenticate') ?? '', /^Bearer /);
  const body = (await refused.json()) as { error: { code: string; message: string; details: { reason: string } } };
  assert.equal(body.error.code, 'UNAUTHORIZED');
  assert.equal(body.error.details.reason, 'session_ended');
  assert.match(
    body.error.message,
    /^The sign-in session this JWT was issued for has ended \(signed out, revoked or expired\): sign in again/,
  );
  // API keys are not sessions: the key made with that JWT still reads the API.
  assert.equal((await fetch(`${base}/api/v1/signals`, { headers: { authorization: `Bearer ${madeKey}` } })).status, 200);
});

test('a cookie-carrying POST from a foreign origin is refused (CSRF)', async () => {
  const res = await post(
    '/auth/sign-in/email',
    { email: EMAIL, password: PASSWORD },
    { cookie: sessionCookie, origin: 'http://evil.example' },
  );
  assert.equal(res.status, 403);
});

test('the page also works from the loopback alias of the public origin (localhost vs 127.0.0.1)', async () => {
  const browser = (origin: string) =>
    svc.app.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      headers: { origin, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors' },
      payload: { email: EMAIL, password: PASSWORD },
      remoteAddress: '10.20.30.40',
    });
  assert.equal((await browser(base.replace('127.0.0.1', 'localhost'))).statusCode, 200);
  assert.equal((await browser('http://localhost:1')).statusCode, 403, 'another port is another origin');
});

test('a person may try a few passwords in a row: three refused as too weak, then a good one, all answered', async () => {
  const email = `tries.${Date.now()}@example.com`;
  const signUp = (password: string) =>
    svc.app.inject({ method: 'POST', url: '/auth/sign-up/email', payload: { name: 'Tries', email, password }, remoteAddress: '10.44.0.1' });
  const statuses: number[] = [];
  for (const password of ['password', '12345678', 'qwertyui']) statuses.push((await signUp(password)).statusCode);
  const good = await signUp('a much longer passphrase');
  statuses.push(good.statusCode);
  assert.deepEqual(statuses, [400, 400, 400, 200], good.body);
  // Then sign-ins right away (better-auth counts sign-in apart from sign-up): a mistyped
  // password three times, then the right one.
  const signIn = (password: string) =>
    svc.app.inject({ method: 'POST', url: '/auth/sign-in/email', payload: { email, password }, remoteAddress: '10.44.0.1' });
  const tries: number[] = [];
  for (const password of ['a much longer passphrasE', 'a much longer passfrase', 'a much longer'])
    tries.push((await signIn(password)).statusCode);
  tries.push((await signIn('a much longer passphrase')).statusCode);
  assert.deepEqual(tries, [401, 401, 401, 200]);
});

test('the README flow with curl: sign up, JWT from the session token, create a key', async () => {
  const email = `bob.${Date.now()}@example.com`;
  const password = 'another long passphrase';
  const up = await curl('POST', '/auth/sign-up/email', {}, JSON.stringify({ name: 'Bob', email, password }));
  assert.equal(up.status, 200, up.body);
  let signIn = await curl('POST', '/auth/sign-in/email', {}, JSON.stringify({ email, password }));
  if (signIn.status === 429) {
    // better-auth's per-address limit (10 sign-ins per 60 s) after the earlier tests: wait as told.
    await new Promise((r) => setTimeout(r, Number(signIn.headers['x-retry-after'] ?? 10) * 1000 + 200));
    signIn = await curl('POST', '/auth/sign-in/email', {}, JSON.stringify({ email, password }));
  }
  assert.equal(signIn.status, 200, signIn.body);
  const session = (JSON.parse(signIn.body) as { token: string }).token;
  const tok = await curl('GET', '/auth/token', { authorization: `Bearer ${session}` });
  assert.equal(tok.status, 200, tok.body);
  const bobJwt = (JSON.parse(tok.body) as { token: string }).token;
  const key = await curl('POST', '/api/v1/keys/create', { authorization: `Bearer ${bobJwt}` }, JSON.stringify({ name: 'cli' }));
  assert.equal(key.status, 201, key.body);
  const apiKey = (JSON.parse(key.body) as { data: { key: string } }).data.key;
  const signals = await curl('GET', '/api/v1/signals', { authorization: `Bearer ${apiKey}` });
  assert.equal(signals.status, 200);
});

test('a changed secret retires the undecryptable signing key: new tokens get a new key, old ones still verify', async () => {
  const { default: Fastify } = await import('fastify');
  const { openDatabase } = await import('../../src/store/db.ts');
  const { createEmbeddedIdentity } = await import('../../src/auth/identity.ts');
  const { identityRoutes } = await import('../../src/http/identity.ts');
  const { createLogger } = await import('../../src/core.ts');
  const database = await openDatabase({ pgliteDir: 'memory://' });
  const issuer = 'http://idp.test';
  const apps: Array<Awaited<ReturnType<typeof Fastify>>> = [];
  try {
    const start = async (secret: string) => {
      const app = Fastify();
      apps.push(app);
      const idp = await createEmbeddedIdentity({
        db: database.db,
        baseUrl: issuer,
        secret,
        audience: AUDIENCE,
        log: createLogger('silent'),
      });
      await identityRoutes(app, idp);
      await app.ready();
      return { app, idp };
    };
    const tokenFor = async (app: (typeof apps)[number], path: string, body: unknown): Promise<string> => {
      const signed = await app.inject({ method: 'POST', url: path, payload: body as object, remoteAddress: '10.9.8.7' });
      assert.equal(signed.statusCode, 200, signed.body);
      const res = await app.inject({
        method: 'GET',
        url: '/auth/token',
        headers: { authorization: `Bearer ${(signed.json() as { token: string }).token}` },
        remoteAddress: '10.9.8.7',
      });
      assert.equal(res.statusCode, 200, res.body);
      return (res.json() as { token: string }).token;
    };
    const creds = { email: 'carol@example.com', password: 'carol password 1' };

    const first = await start('a'.repeat(40));
    const up = await first.app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      payload: { name: 'Carol', ...creds },
      remoteAddress: '10.9.8.7',
    });
    assert.equal(up.statusCode, 200, up.body);
    const jwt1 = await tokenFor(first.app, '/auth/sign-in/email', creds);

    const second = await start('b'.repeat(40)); // e.g. a restart with a new generated secret
    const verifier = createJwtVerifier({ issuer, audience: AUDIENCE, jwks: second.idp.jwks });
    assert.equal((await verifier.verify(jwt1)).email, creds.email, 'the old key stays published');
    const jwt2 = await tokenFor(second.app, '/auth/sign-in/email', creds);
    assert.notEqual(decodeProtectedHeader(jwt2).kid, decodeProtectedHeader(jwt1).kid, 'signed with a new key');
    // The verifier had loaded the key set before the new key existed: it reloads on the unknown kid.
    assert.equal((await verifier.verify(jwt2)).email, creds.email);
  } finally {
    for (const app of apps) await app.close();
    await database.close();
  }
});

test('on PostgreSQL, an instance with another AUTH_SECRET leaves the shared signing key alone and says why; the others keep issuing tokens', async (t) => {
  if (!(await postgresAvailable())) return void t.skip(PG_SKIP);
  const tmp = await createTempPgDatabase();
  const url = 'http://shared.idp.test';
  const lines: string[] = [];
  const logStream = new (await import('node:stream')).Writable({
    write: (c, _e, cb) => {
      lines.push(c.toString());
      cb();
    },
  });
  let a: Service | null = null;
  let b: Service | null = null;
  try {
    a = await createService(testConfig({ DATABASE_URL: tmp.url, AUTH_SECRET: 'a'.repeat(40) }), { publicUrl: url });
    const email = 'erin@example.com';
    const password = 'erin password 123';
    const at = (svc: Service, method: 'GET' | 'POST', path: string, headers: Record<string, string> = {}, payload?: object) =>
      svc.app.inject({ method, url: path, headers, payload, remoteAddress: '10.4.5.6' });
    assert.equal((await at(a, 'POST', '/auth/sign-up/email', {}, { name: 'Erin', email, password })).statusCode, 200);
    const tokenOn = async (svc: Service) => {
      const signed = await at(svc, 'POST', '/auth/sign-in/email', {}, { email, password });
      if (signed.statusCode !== 200) return signed.statusCode;
      return (await at(svc, 'GET', '/auth/token', { authorization: `Bearer ${(signed.json() as { token: string }).token}` })).statusCode;
    };
    assert.equal(await tokenOn(a), 200, 'A issues a JWT (its signing key is made)');
    b = await createService(testConfig({ DATABASE_URL: tmp.url, AUTH_SECRET: 'b'.repeat(40), LOG_LEVEL: 'info' }), {
      publicUrl: url,
      logStream,
    });
    // B's identity provider is refused: /auth answers 500, the log says what to do.
    assert.equal(await tokenOn(b), 500);
    const line = lines.find((l) => l.includes('identity provider could not be created'));
    assert.ok(line, 'the refusal is logged');
    assert.match(line, /AUTH_SECRET cannot decrypt the signing key .* give every instance the same AUTH_SECRET/);
    // The shared key was not retired: A goes on signing with it.
    assert.equal(await tokenOn(a), 200, 'A still issues JWTs');
  } finally {
    await b?.stop();
    await a?.stop();
    await tmp.drop();
  }
});

test('on PostgreSQL: sign up, JWT, key, and the password hash at rest', async (t) => {
  if (!(await postgresAvailable())) return void t.skip(PG_SKIP);
  const tmp = await createTempPgDatabase();
  let pgSvc: Service | null = null;
  try {
    const url = 'http://pg.idp.test';
    pgSvc = await createService(testConfig({ DATABASE_URL: tmp.url, AUTH_SECRET: 'p'.repeat(40) }), { publicUrl: url });
    const app = pgSvc.app;
    const email = 'dave@example.com';
    const password = 'dave password 123';
    const up = await app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      payload: { name: 'Dave', email, password },
      remoteAddress: '10.1.2.3',
    });
    assert.equal(up.statusCode, 200, up.body);
    const signIn = await app.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      payload: { email, password },
      remoteAddress: '10.1.2.4',
    });
    assert.equal(signIn.statusCode, 200, signIn.body);
    const bad = await app.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      payload: { email, password: 'wrong password!' },
      remoteAddress: '10.1.2.3',
    });
    assert.equal(bad.statusCode, 401);
    const tok = await app.inject({
      method: 'GET',
      url: '/auth/token',
      headers: { authorization: `Bearer ${(signIn.json() as { token: string }).token}` },
    });
    assert.equal(tok.statusCode, 200, tok.body);
    const pgJwt = (tok.json() as { token: string }).token;
    assert.equal(decodeJwt(pgJwt).iss, url);
    const key = await app.inject({
      method: 'POST',
      url: '/api/v1/keys/create',
      headers: { authorization: `Bearer ${pgJwt}` },
      payload: { name: 'pg' },
    });
    assert.equal(key.statusCode, 201, key.body);
    const sub = decodeJwt(pgJwt).sub!;
    const [row] = await pgSvc.database.db.select().from(authAccount).where(eq(authAccount.userId, sub));
    assert.match(row?.password ?? '', /^[0-9a-f]{32}:[0-9a-f]{128}$/);
  } finally {
    await pgSvc?.stop();
    await tmp.drop();
  }
});

/**
 * A sign-up whose credential row cannot be written (here a trigger refuses it; in production a
 * timeout or a lost connection between the two inserts) must leave no user behind: the user
 * row and the credential row are written in one transaction. Before, the user row stayed
 * without a password, and the email could never be signed up or signed in again.
 */
async function signUpFailingMidway(target: Service, email: string): Promise<void> {
  const db = target.database.db;
  const password = 'violet tractor ocean lamp';
  await db.execute(sql`create function fail_credential() returns trigger language plpgsql as $$
    begin raise exception 'injected failure'; end $$`);
  await db.execute(sql`create trigger fail_credential before insert on auth_account for each row execute function fail_credential()`);
  try {
    const up = await target.app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      payload: { name: 'Half', email, password },
      remoteAddress: '10.7.7.1',
    });
    assert.ok(up.statusCode >= 500, `the failed sign-up is an error: ${up.statusCode} ${up.body}`);
  } finally {
    await db.execute(sql`drop trigger fail_credential on auth_account`);
    await db.execute(sql`drop function fail_credential()`);
  }
  const left = await db.select({ id: authUser.id }).from(authUser).where(eq(authUser.email, email));
  assert.deepEqual(left, [], 'no user row without its credentials');
  // The email is free: signing up again creates the account, and its password signs in.
  const again = await target.app.inject({
    method: 'POST',
    url: '/auth/sign-up/email',
    payload: { name: 'Half', email, password },
    remoteAddress: '10.7.7.2',
  });
  assert.equal(again.statusCode, 200, again.body);
  const signIn = await target.app.inject({
    method: 'POST',
    url: '/auth/sign-in/email',
    payload: { email, password },
    remoteAddress: '10.7.7.3',
  });
  assert.equal(signIn.statusCode, 200, signIn.body);
}

test('a sign-up that fails after creating the user leaves no half-made account (PGlite)', async () => {
  await signUpFailingMidway(svc, `half.${Date.now()}@example.com`);
});

test('a sign-up that fails after creating the user leaves no half-made account (PostgreSQL)', async (t) => {
  if (!(await postgresAvailable())) return void t.skip(PG_SKIP);
  const tmp = await createTempPgDatabase();
  let pgSvc: Service | null = null;
  try {
    pgSvc = await createService(testConfig({ DATABASE_URL: tmp.url, AUTH_SECRET: 'h'.repeat(40) }), { publicUrl: 'http://half.idp.test' });
    await signUpFailingMidway(pgSvc, 'half@example.com');
  } finally {
    await pgSvc?.stop();
    await tmp.drop();
  }
});

/**
 * Sign-ups of one email at the same moment: each looks the email up before any has created the
 * account, so all but one lose on the unique email. The losers must get the answer a later
 * duplicate sign-up gets (200 {token: null, user}), not better-auth's 422 FAILED_TO_CREATE_USER,
 * which told that the email had just been taken.
 */
async function racingSignUps(target: Service, email: string, from: string): Promise<void> {
  const password = 'amber kettle quietly orbits';
  const ups = await Promise.all(
    Array.from({ length: 4 }, (_, i) =>
      target.app.inject({
        method: 'POST',
        url: '/auth/sign-up/email',
        payload: { name: 'Racer', email, password },
        remoteAddress: `${from}${i + 1}`,
      }),
    ),
  );
  for (const up of ups) {
    assert.equal(up.statusCode, 200, up.body);
    const body = up.json() as { token: unknown; user: Record<string, unknown> };
    assert.equal(body.token, null);
    assert.deepEqual(Object.keys(body.user).sort(), ['createdAt', 'email', 'emailVerified', 'id', 'image', 'name', 'updatedAt']);
    assert.equal(body.user.email, email);
  }
  const rows = await target.database.db.select({ id: authUser.id }).from(authUser).where(eq(authUser.email, email));
  assert.equal(rows.length, 1, 'one account');
  // A later duplicate sign-up answers the same way.
  const later = await target.app.inject({
    method: 'POST',
    url: '/auth/sign-up/email',
    payload: { name: 'Racer', email, password },
    remoteAddress: `${from}9`,
  });
  assert.equal(later.statusCode, 200, later.body);
  for (const up of ups) assert.deepEqual(Object.keys(up.headers).sort(), Object.keys(later.headers).sort(), 'the same headers');
  const signIn = await target.app.inject({
    method: 'POST',
    url: '/auth/sign-in/email',
    payload: { email, password },
    remoteAddress: `${from}8`,
  });
  assert.equal(signIn.statusCode, 200, signIn.body);
}

test('sign-ups of one email racing each other all get the duplicate answer, not 422 FAILED_TO_CREATE_USER (PGlite)', async () => {
  await racingSignUps(svc, `race.${Date.now()}@example.com`, '10.8.8.');
});

test('sign-ups of one email racing each other all get the duplicate answer, not 422 FAILED_TO_CREATE_USER (PostgreSQL)', async (t) => {
  if (!(await postgresAvailable())) return void t.skip(PG_SKIP);
  const tmp = await createTempPgDatabase();
  let pgSvc: Service | null = null;
  try {
    const lines: string[] = [];
    const logStream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    pgSvc = await createService(testConfig({ DATABASE_URL: tmp.url, AUTH_SECRET: 'r'.repeat(40), LOG_LEVEL: 'info' }), {
      publicUrl: 'http://race.idp.test',
      logStream,
    });
    await racingSignUps(pgSvc, 'race@example.com', '10.8.9.');
    // A lost race is logged as a warning (level 40), not as an error of the service (50).
    const raced = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => /Failed to create user/.test(l.msg));
    assert.ok(raced.length > 0, 'the lost races are logged');
    assert.deepEqual([...new Set(raced.map((l) => l.level))], [40]);
  } finally {
    await pgSvc?.stop();
    await tmp.drop();
  }
});

test('a burst of sign-in attempts from one address is cut at the eleventh within 60 s (better-auth, per instance)', async () => {
  // Different accounts each time, so that the service's own throttle (10 per account, 30 per
  // address per 15 minutes) does not answer first: this is better-auth's burst rule.
  const statuses: number[] = [];
  let last: Awaited<ReturnType<typeof svc.app.inject>> | undefined;
  for (let i = 0; i < 11; i++) {
    last = await svc.app.inject({
      method: 'POST',
      url: '/auth/sign-in/email',
      payload: { email: `burst-${i}.${Date.now()}@example.com`, password: `wrong-${i}-password` },
      remoteAddress: '10.45.0.1',
    });
    statuses.push(last.statusCode);
  }
  assert.deepEqual(statuses, [...Array(10).fill(401), 429]);
  assert.equal(JSON.parse(last!.body).message, 'Too many requests. Please try again later.');
  assert.ok(Number(last!.headers['x-retry-after']) > 50, String(last!.headers['x-retry-after']));
});
