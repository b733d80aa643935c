import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { type AddressInfo, connect } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import { createService, type Service } from '../../src/server.ts';
import { SIGN_UP_NAME_MAX, SIGNIN_ACCOUNT_LIMIT } from '../../src/http/identity.ts';
import { authSession, authUser } from '../../src/store/auth-schema.ts';
import { createTempPgDatabase, PG_SKIP, postgresAvailable, REDIS_SKIP, REDIS_URL, redisAvailable, testConfig } from '../helpers/env.ts';

// The embedded identity provider (AUTH_ISSUER unset) of the real service: session tokens at
// rest, logs and answers during a database outage, the cross-instance sign-in throttle, the
// password policy and sign-up without account enumeration.

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
let ipSeq = 0;
/** A fresh client address per call (better-auth's own per-address limit is 10 per 60 s for sign-in and sign-up). */
const freshIp = () => `10.66.${Math.floor(++ipSeq / 250)}.${(ipSeq % 250) + 1}`;

async function post(svc: Service, url: string, payload: unknown, headers: Record<string, string> = {}) {
  const r = await svc.app.inject({ method: 'POST', url, payload: payload as object, headers, remoteAddress: freshIp() });
  let body: any;
  try {
    body = r.json();
  } catch {
    body = undefined;
  }
  return { status: r.statusCode, headers: r.headers, body, raw: r.body };
}

function capture(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  return {
    lines,
    stream: new Writable({
      write(c, _e, cb) {
        lines.push(...c.toString().split('\n').filter(Boolean));
        cb();
      },
    }),
  };
}

describe('embedded identity provider on PGlite', () => {
  let svc: Service;
  before(async () => {
    svc = await createService(testConfig(), { publicUrl: 'http://idp.hardening.test' });
    await svc.app.ready();
  });
  after(() => svc?.stop());

  test('weak passwords are refused at sign-up with a clear message, and no account is created', async () => {
    const email = `weak.${Date.now()}@example.com`;
    for (const password of ['aaaaaaaa', 'password', '12345678', 'qwertyuiop', email, 'Weakling Name']) {
      const r = await post(svc, '/auth/sign-up/email', { name: 'Weakling Name', email, password });
      assert.equal(r.status, 400, `${password}: ${r.raw}`);
      assert.equal(r.body.code, 'PASSWORD_TOO_WEAK', password);
      assert.match(r.body.message, /^Password (too weak|refused)/, password);
      assert.match(r.body.message, /8 to 128 characters/, 'says what is accepted');
    }
    assert.equal((await svc.database.db.select().from(authUser).where(eq(authUser.email, email))).length, 0);
    const ok = await post(svc, '/auth/sign-up/email', { name: 'Strong', email, password: 'violet tractor orbit 42' });
    assert.equal(ok.status, 200, ok.raw);
    // A signed-in password change is held to the same rules, against the session's own email and name.
    const signIn = await post(svc, '/auth/sign-in/email', { email, password: 'violet tractor orbit 42' });
    assert.equal(signIn.status, 200, signIn.raw);
    const auth = { authorization: `Bearer ${signIn.body.token}` };
    for (const newPassword of [email, 'Strong', 'password']) {
      const r = await post(svc, '/auth/change-password', { currentPassword: 'violet tractor orbit 42', newPassword }, auth);
      assert.equal(r.status, 400, `${newPassword}: ${r.raw}`);
      assert.equal(r.body.code, 'PASSWORD_TOO_WEAK', newPassword);
    }
    const changed = await post(
      svc,
      '/auth/change-password',
      { currentPassword: 'violet tractor orbit 42', newPassword: 'amber glacier pilot 17' },
      auth,
    );
    assert.equal(changed.status, 200, changed.raw);
  });

  test('answers better-auth leaves bare are in the envelope with what to do: a too long name, an unknown path, /auth/token without a session', async () => {
    const email = `long.${Date.now()}@example.com`;
    const long = await post(svc, '/auth/sign-up/email', {
      name: 'n'.repeat(SIGN_UP_NAME_MAX + 1),
      email,
      password: 'violet tractor orbit 42',
    });
    assert.equal(long.status, 400, long.raw);
    assert.equal(long.body.error.code, 'INVALID_PARAMETER');
    assert.match(long.body.error.message, new RegExp(`'name': at most ${SIGN_UP_NAME_MAX} characters`));
    assert.equal((await svc.database.db.select().from(authUser).where(eq(authUser.email, email))).length, 0, 'no account');
    const ok = await post(svc, '/auth/sign-up/email', { name: 'n'.repeat(SIGN_UP_NAME_MAX), email, password: 'violet tractor orbit 42' });
    assert.equal(ok.status, 200, ok.raw);
    // The same limit on renaming, in characters (code points), not UTF-16 units.
    const signIn = await post(svc, '/auth/sign-in/email', { email, password: 'violet tractor orbit 42' });
    assert.equal(signIn.status, 200, signIn.raw);
    const session = { authorization: `Bearer ${signIn.body.token}` };
    const rename = await post(svc, '/auth/update-user', { name: '📈'.repeat(SIGN_UP_NAME_MAX + 1) }, session);
    assert.equal(rename.status, 400, rename.raw);
    assert.match(rename.body.error.message, new RegExp(`got ${SIGN_UP_NAME_MAX + 1}\\)`));
    const fine = await post(svc, '/auth/update-user', { name: '📈'.repeat(SIGN_UP_NAME_MAX) }, session);
    assert.equal(fine.status, 200, fine.raw);
    // A body over the identity provider's own limit names that limit (64 KiB), not the API's.
    const huge = await post(svc, '/auth/sign-up/email', { name: 'x', email: `huge.${email}`, password: 'p'.repeat(70_000) });
    assert.equal(huge.status, 400, huge.raw);
    assert.match(huge.body.error.message, /too large: at most 65,536 bytes/);

    const unknown = await svc.app.inject({ method: 'GET', url: '/auth/no-such-endpoint', remoteAddress: freshIp() });
    assert.equal(unknown.statusCode, 404, unknown.body);
    assert.equal(unknown.json().error.code, 'NOT_FOUND');
    assert.match(unknown.json().error.message, /sign in with POST \/auth\/sign-in\/email/);

    // Endpoints this service does not offer say so (better-auth logged an error for each).
    const reset = await post(svc, '/auth/request-password-reset', { email: 'a@b.c' });
    assert.equal(reset.status, 404, reset.raw);
    assert.equal(reset.body.error.code, 'NOT_FOUND');
    assert.match(reset.body.error.message, /^Password reset is not offered: this service sends no email/);
    assert.match((await post(svc, '/auth/delete-user', {})).body.error.message, /^Deleting an account is not offered here/);

    // better-auth's HTML error page is framed and sniffed no more than the dashboard's pages.
    const page = await svc.app.inject({ method: 'GET', url: '/auth/error?error=x', remoteAddress: freshIp() });
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(String(page.headers['content-security-policy']), /^default-src 'none'; style-src 'unsafe-inline';/);
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.equal(page.headers['x-content-type-options'], 'nosniff');

    for (const headers of [{}, { authorization: 'Bearer not-a-session' }]) {
      const token = await svc.app.inject({ method: 'GET', url: '/auth/token', headers, remoteAddress: freshIp() });
      assert.equal(token.statusCode, 401, token.body);
      assert.equal(token.json().error.code, 'UNAUTHORIZED');
      assert.match(token.json().error.message, /^No valid session: sign in with POST \/auth\/sign-in\/email/);
    }
  });

  test('a path better-auth would resolve differently (dot segments, a fragment, percent-encoding) reaches no endpoint: the checks cannot be skipped', async () => {
    // Over a socket, request-target byte for byte (no client normalizes it on the way).
    await svc.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (svc.app.server.address() as AddressInfo).port;
    const raw = (target: string, body: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () =>
          socket.write(
            `POST ${target} HTTP/1.1\r\nHost: idp.hardening.test\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
          ),
        );
        let text = '';
        socket.on('data', (d) => (text += d.toString()));
        socket.on('end', () => resolve({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) }));
        socket.on('error', reject);
      });
    const email = `dots.${Date.now()}@example.com`;
    const up = JSON.stringify({ name: 'Dots', email, password: 'violet tractor orbit 42' });
    assert.equal((await raw('/auth/sign-up/email', up)).status, 200);
    const signIn = JSON.stringify({ email, password: 'violet tractor orbit 42' });
    const longName = JSON.stringify({ name: 'n'.repeat(SIGN_UP_NAME_MAX * 50), email: `x.${email}`, password: 'violet tractor orbit 42' });
    for (const [target, body] of [
      ['/auth/x/../sign-in/email', signIn],
      ['/auth/./sign-in/email', signIn],
      ['/auth/sign-in/email#x', signIn],
      ['/auth/sign%2Din/email', signIn],
      ['/auth/./sign-up/email', longName],
      ['/auth/x/../request-password-reset', JSON.stringify({ email })],
    ]) {
      const r = await raw(target!, body!);
      assert.equal(r.status, 404, `${target}: ${r.body}`);
      assert.equal(JSON.parse(r.body).error.code, 'NOT_FOUND', target);
    }
    assert.equal(
      (
        await svc.database.db
          .select()
          .from(authUser)
          .where(eq(authUser.email, `x.${email}`))
      ).length,
      0,
      'no account',
    );
    assert.equal((await raw('/auth/sign-in/email', signIn)).status, 200, 'the path as written still signs in');
  });

  test('sign-up for an existing email is indistinguishable from a new one (status and body shape), and changes nothing', async () => {
    const email = `exists.${Date.now()}@example.com`;
    const password = 'maple canyon ferry 7';
    const first = await post(svc, '/auth/sign-up/email', { name: 'Erin', email, password });
    const again = await post(svc, '/auth/sign-up/email', { name: 'Erin', email, password: 'another river stone 9' });
    const fresh = await post(svc, '/auth/sign-up/email', { name: 'Erin', email: `new.${email}`, password });
    const shape = (b: any): unknown =>
      b && typeof b === 'object'
        ? Object.fromEntries(
            Object.keys(b)
              .sort()
              .map((k) => [k, shape(b[k])]),
          )
        : typeof b;
    assert.equal(first.status, 200, first.raw);
    assert.equal(again.status, fresh.status);
    assert.deepEqual(shape(again.body), shape(fresh.body));
    assert.equal(again.body.user.email, email);
    assert.equal(again.headers['set-cookie'], fresh.headers['set-cookie']);
    // A name the database or a reader would choke on (NUL, other control characters, a
    // bidirectional override) is refused before any lookup: the same 400 for both emails.
    for (const name of ['a\u0000b', 'a\u0007b', '\u202eabc', '\u200b', 'x\u061c', 'x\u{E0041}', '  ']) {
      const known = await post(svc, '/auth/sign-up/email', { name, email, password });
      const unknownEmail = await post(svc, '/auth/sign-up/email', { name, email: `other.${email}`, password });
      assert.equal(known.status, 400, `${JSON.stringify(name)} ${known.raw}`);
      assert.equal(known.body.error.code, 'INVALID_PARAMETER');
      assert.deepEqual(known.body.error, unknownEmail.body.error, JSON.stringify(name));
      assert.match(
        known.body.error.message,
        /^Invalid body field 'name': must not (contain control or invisible formatting characters \(or an unpaired surrogate\)|be blank); send a display name$/,
      );
    }
    const session = { authorization: `Bearer ${(await post(svc, '/auth/sign-in/email', { email, password })).body.token}` };
    const nul = await post(svc, '/auth/update-user', { name: 'a\u0000b' }, session);
    assert.equal(nul.status, 400, nul.raw);
    assert.equal(nul.body.error.code, 'INVALID_PARAMETER');
    // The account keeps its password: the second sign-up did not take it over.
    assert.equal((await post(svc, '/auth/sign-in/email', { email, password })).status, 200);
    assert.equal((await post(svc, '/auth/sign-in/email', { email, password: 'another river stone 9' })).status, 401);
    // A new password with a control character is refused (a trailing NUL is invisible to the
    // hash: HMAC pads its key with zero bytes), the same 400 for a known and an unknown email,
    // also behind a byte-order mark (which better-auth's JSON reader drops).
    for (const bad of [`${password}\u0000`, `maple\tcanyon ferry 7`, `${password}\u007f`]) {
      const known = await post(svc, '/auth/sign-up/email', { name: 'Nul', email, password: bad });
      const other = await post(svc, '/auth/sign-up/email', { name: 'Nul', email: `nul.${email}`, password: bad });
      assert.equal(known.status, 400, `${JSON.stringify(bad)} ${known.raw}`);
      assert.deepEqual(known.body.error, other.body.error);
      assert.equal(known.body.error.details.field, 'password');
      assert.match(known.body.error.message, /^Invalid body field 'password': a password must not contain control characters/);
    }
    const bom = await svc.app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      headers: { 'content-type': 'application/json' },
      payload: `\uFEFF${JSON.stringify({ name: 'Bom', email: `bom.${email}`, password: `${password}\u0000` })}`,
      remoteAddress: freshIp(),
    });
    assert.equal(bom.statusCode, 400, bom.body);
    const change = await post(
      svc,
      '/auth/change-password',
      { currentPassword: password, newPassword: 'river\u0000stone quiet 3' },
      session,
    );
    assert.equal(change.status, 400, change.raw);
    assert.equal(change.body.error.details.field, 'newPassword');
    assert.equal((await post(svc, '/auth/sign-in/email', { email, password })).status, 200, 'the password is unchanged');
  });

  test('session tokens are stored as SHA-256 digests; bearer, cookie, /auth/token and sign-out still work', async () => {
    const email = `digest.${Date.now()}@example.com`;
    const password = 'harbor lantern quiet 5';
    await post(svc, '/auth/sign-up/email', { name: 'Dee', email, password });
    const signIn = await post(svc, '/auth/sign-in/email', { email, password });
    assert.equal(signIn.status, 200, signIn.raw);
    const token: string = signIn.body.token;
    const rows = await svc.database.db.select().from(authSession).where(eq(authSession.userId, signIn.body.user.id));
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.token, sha256(token));
    const dump = JSON.stringify((await svc.database.db.execute(sql`select * from auth_session`)) as unknown);
    assert.ok(!dump.includes(token), 'no session token in auth_session');

    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    for (const headers of [
      { authorization: `Bearer ${token}` },
      { authorization: `Bearer ${signIn.headers['set-auth-token']}` },
      { cookie },
    ]) {
      const r = await svc.app.inject({ method: 'GET', url: '/auth/token', headers });
      assert.equal(r.statusCode, 200, r.body);
    }
    // A database reader who copies the digest gets nothing from it.
    const stolen = await svc.app.inject({ method: 'GET', url: '/auth/token', headers: { authorization: `Bearer ${rows[0]!.token}` } });
    assert.equal(stolen.statusCode, 401);
    const out = await svc.app.inject({
      method: 'POST',
      url: '/auth/sign-out',
      headers: { cookie, origin: 'http://idp.hardening.test' },
      remoteAddress: freshIp(),
    });
    assert.equal(out.statusCode, 200, out.body);
    assert.equal((await svc.app.inject({ method: 'GET', url: '/auth/token', headers: { cookie } })).statusCode, 401);
    assert.equal(
      (
        await svc.database.db
          .select()
          .from(authSession)
          .where(eq(authSession.token, sha256(token)))
      ).length,
      0,
    );
  });

  test('a session from list-sessions can be revoked by what the list shows (its digest); revoke-other-sessions ends the others, not this one', async () => {
    const email = `sessions.${Date.now()}@example.com`;
    const password = 'meadow copper signal 8';
    await post(svc, '/auth/sign-up/email', { name: 'Sam', email, password });
    const signIns: string[] = [];
    let cookieA = '';
    for (let i = 0; i < 4; i++) {
      const r = await post(svc, '/auth/sign-in/email', { email, password });
      signIns.push(r.body.token);
      if (i === 0) cookieA = String(r.headers['set-cookie']).split(';')[0]!;
    }
    const [a, b, c, d] = signIns as [string, string, string, string];
    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    const works = async (token: string) =>
      (await svc.app.inject({ method: 'GET', url: '/auth/token', headers: as(token) })).statusCode === 200;
    // A JWT from each session; the API refuses one once its session has ended (reason session_ended).
    const jwtOf = async (token: string) =>
      ((await svc.app.inject({ method: 'GET', url: '/auth/token', headers: as(token) })).json() as { token: string }).token;
    const [jwtA, jwtB, jwtD] = [await jwtOf(a), await jwtOf(b), await jwtOf(d)];
    const api = async (jwt: string) => {
      const r = await svc.app.inject({ method: 'GET', url: '/api/v1/keys', headers: as(jwt), remoteAddress: freshIp() });
      return r.statusCode === 200
        ? 'ok'
        : `${r.statusCode} ${(r.json() as { error: { details?: { reason?: string } } }).error.details?.reason}`;
    };
    assert.deepEqual([await api(jwtA), await api(jwtB), await api(jwtD)], ['ok', 'ok', 'ok']);
    const list = await svc.app.inject({ method: 'GET', url: '/auth/list-sessions', headers: as(a) });
    const shown = (list.json() as { token: string }[]).map((x) => x.token);
    assert.equal(shown.length, 4);
    assert.ok(shown.includes(sha256(b)), 'the list shows digests, never a token');
    // Revoke B by the value the list shows.
    const revoked = await post(svc, '/auth/revoke-session', { token: sha256(b) }, as(a));
    assert.equal(revoked.status, 200, revoked.raw);
    assert.deepEqual(revoked.body, { status: true });
    assert.equal(await works(b), false, 'B is ended');
    assert.equal(await works(a), true, 'A still works');
    assert.deepEqual([await api(jwtA), await api(jwtB)], ['ok', '401 session_ended'], "B's JWT ends with B");
    // A digest that is none of the caller's sessions: nothing done, and it says so.
    const other = await post(svc, '/auth/revoke-session', { token: sha256('not a session of mine') }, as(a));
    assert.deepEqual(other.body, { status: false });
    // Nor is any other string (better-auth answered true for it).
    const junk = await post(svc, '/auth/revoke-session', { token: 'not a session token' }, as(a));
    assert.deepEqual(junk.body, { status: false });
    // The clear token of one's own session still works.
    assert.deepEqual((await post(svc, '/auth/revoke-session', { token: c }, as(a))).body, { status: true });
    assert.equal(await works(c), false);
    // A page on another origin posting with A's cookie (CSRF), or a body that is not JSON: refused, nothing ended.
    const csrf = await svc.app.inject({
      method: 'POST',
      url: '/auth/revoke-other-sessions',
      headers: { cookie: cookieA, origin: 'http://evil.example', 'content-type': 'application/json' },
      payload: '{}',
      remoteAddress: freshIp(),
    });
    assert.equal(csrf.statusCode, 403, csrf.body);
    const form = await svc.app.inject({
      method: 'POST',
      url: '/auth/revoke-session',
      headers: { cookie: cookieA, 'content-type': 'text/plain' },
      payload: JSON.stringify({ token: sha256(d) }),
      remoteAddress: freshIp(),
    });
    assert.notEqual(form.statusCode, 200, form.body);
    // The others: D ends, A (the caller) stays.
    assert.equal(await works(d), true, 'D survived the refused requests');
    assert.deepEqual((await post(svc, '/auth/revoke-other-sessions', {}, as(a))).body, { status: true });
    assert.equal(await works(d), false, 'D is ended');
    assert.equal(await works(a), true, 'the caller keeps its session');
    assert.deepEqual([await api(jwtA), await api(jwtD)], ['ok', '401 session_ended'], "D's JWT ends with D");
    // Without a session: 401, nothing deleted.
    assert.equal((await post(svc, '/auth/revoke-other-sessions', {})).status, 401);
  });
});

test("a client's refused identity request (a foreign callbackURL, a bad Origin) is a short warning in the log, not a long error line", async () => {
  const log = capture();
  const svc = await createService(testConfig({ LOG_LEVEL: 'info' }), { logStream: log.stream, publicUrl: 'http://idp.logs.test' });
  try {
    await svc.app.ready();
    const long = `https://evil.example/${'X'.repeat(12_000)}`;
    const r = await svc.app.inject({ method: 'GET', url: `/auth/verify-email?token=a&callbackURL=${encodeURIComponent(long)}` });
    assert.ok(r.statusCode >= 400 && r.statusCode < 500, `${r.statusCode} ${r.body.slice(0, 200)}`);
    const lines = log.lines.map((l) => JSON.parse(l) as { level: number; msg: string });
    const mention = lines.filter((l) => /callbackURL/i.test(l.msg));
    assert.ok(mention.length > 0, 'the refusal is logged');
    for (const l of mention) {
      assert.equal(l.level, 40, 'a warning, not an error');
      assert.ok(l.msg.length < 400, `${l.msg.length} characters`);
    }
    assert.ok(!lines.some((l) => l.level >= 50), 'no error-level line for a client mistake');
  } finally {
    await svc.stop();
  }
});

const pgUp = await postgresAvailable();
const redisUp = await redisAvailable();

describe('embedded identity provider on PostgreSQL', () => {
  test(
    'no session token, key, password, SQL parameter or email in any table column or log line after a run with a database outage',
    { skip: pgUp ? false : PG_SKIP },
    async () => {
      const db = await createTempPgDatabase();
      const log = capture();
      const svc = await createService(testConfig({ DATABASE_URL: db.url, AUTH_SECRET: 's'.repeat(40), LOG_LEVEL: 'info' }), {
        logStream: log.stream,
        publicUrl: 'http://idp.outage.test',
      });
      try {
        await svc.app.ready();
        const email = `outage.${Date.now()}@example.com`;
        const password = 'copper meadow signal 8';
        assert.equal((await post(svc, '/auth/sign-up/email', { name: 'Olga', email, password })).status, 200);
        const signIn = await post(svc, '/auth/sign-in/email', { email, password });
        assert.equal(signIn.status, 200, signIn.raw);
        const session: string = signIn.body.token;
        const signed = String(signIn.headers['set-auth-token']);
        const tok = await svc.app.inject({ method: 'GET', url: '/auth/token', headers: { authorization: `Bearer ${session}` } });
        assert.equal(tok.statusCode, 200, tok.body);
        const jwt: string = tok.json().token;
        const key = await svc.app.inject({
          method: 'POST',
          url: '/api/v1/keys/create',
          headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
          payload: '{}',
        });
        assert.equal(key.statusCode, 201, key.body);
        const apiKey: string = key.json().data.key;
        await post(svc, '/auth/sign-in/email', { email, password: 'a wrong guess here' });

        const secrets = { session, signed, apiKey, password, jwtSignature: jwt.split('.')[2]! };
        const tables = (await svc.database.db.execute(
          sql`select table_name from information_schema.tables where table_schema = 'public'`,
        )) as unknown as { rows: { table_name: string }[] };
        assert.ok(tables.rows.length >= 8);
        for (const { table_name } of tables.rows) {
          const dump = JSON.stringify(
            ((await svc.database.db.execute(sql.raw(`select * from "${table_name}"`))) as unknown as { rows: unknown[] }).rows,
          );
          for (const [what, v] of Object.entries(secrets)) assert.ok(!dump.includes(v), `${what} found in ${table_name}`);
        }

        // The outage: the database goes away under the running service. Nothing may reach the
        // console either (better-call wrote there before), only JSON lines through the logger.
        const consoleLines: string[] = [];
        const saved = { error: console.error, warn: console.warn, log: console.log, info: console.info };
        for (const k of ['error', 'warn', 'log', 'info'] as const)
          console[k] = (...args: unknown[]) => void consoleLines.push(args.map(String).join(' '));
        await db.drop();
        // A signed-in user's JWT first, so that its line is the outage's first (OutageLog folds
        // later ones): its sign-in session cannot be looked up. That is 503, the database's
        // fault, not 401, and the line carries the database's own error, not the answer's words.
        const jwtCall = await svc.app.inject({ method: 'GET', url: '/api/v1/keys', headers: { authorization: `Bearer ${jwt}` } });
        assert.equal(jwtCall.statusCode, 503, jwtCall.body);
        assert.equal(jwtCall.json().error.message, 'The identity provider could not be reached; try again shortly');
        const firstOutageLine = log.lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'dependency unavailable');
        assert.ok(firstOutageLine?.err, 'the 503 of the session look-up is logged with its cause');
        // PostgreSQL's own SQLSTATE (3D000, the database does not exist), not the answer's words.
        assert.match(String(firstOutageLine.err.code), /^[0-9A-Z]{5}$/, JSON.stringify(firstOutageLine.err));
        assert.doesNotMatch(JSON.stringify(firstOutageLine.err), /identity provider could not/, 'the cause, not the answer');
        // Keyed API and MCP requests during the outage are logged too (their key look-up fails).
        const keyed = await svc.app.inject({ method: 'GET', url: '/api/v1/signals', headers: { authorization: `Bearer ${apiKey}` } });
        assert.equal(keyed.statusCode, 503, keyed.body);
        const mcp = await svc.app.inject({
          method: 'POST',
          url: '/mcp',
          headers: {
            authorization: `Bearer ${apiKey}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            host: '127.0.0.1',
          },
          payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
        });
        assert.equal(mcp.statusCode, 503, mcp.body);
        // Both say when to try again (errors.ts `unavailable`): REST in its envelope, MCP in the JSON-RPC error's data.
        assert.equal(keyed.headers['retry-after'], '5');
        assert.equal(keyed.json().error.details.retry_after, 5);
        assert.equal(mcp.headers['retry-after'], '5');
        assert.equal(mcp.json().error.data.retry_after, 5);
        const during = [
          await post(svc, '/auth/sign-in/email', { email, password }),
          await post(svc, '/auth/sign-up/email', { name: 'Olga', email: `x.${email}`, password }),
          await svc.app.inject({ method: 'GET', url: '/auth/token', headers: { authorization: `Bearer ${session}` } }),
          await svc.app.inject({ method: 'GET', url: '/auth/get-session', headers: { authorization: `Bearer ${signed}` } }),
        ].map((r) => ('statusCode' in r ? { status: r.statusCode, body: r.json(), headers: r.headers } : r));
        for (const r of during) {
          assert.equal(r.status, 503, JSON.stringify(r.body));
          assert.equal(r.body.status, 'error');
          assert.equal(r.body.error.code, 'SERVICE_UNAVAILABLE');
          assert.match(r.body.error.message, /try again/);
          assert.ok(Number(r.headers['retry-after']) >= 1);
        }

        for (const k of ['error', 'warn', 'log', 'info'] as const) console[k] = saved[k];
        assert.deepEqual(consoleLines, [], 'nothing written to the console during the outage');
        const lines = log.lines;
        assert.ok(lines.length > 5, 'requests were logged');
        for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `not JSON: ${line.slice(0, 200)}`);
        const all = lines.join('\n');
        for (const [what, v] of Object.entries(secrets)) assert.ok(!all.includes(v), `${what} found in the logs`);
        assert.ok(!all.includes(email), 'email found in the logs');
        assert.ok(!all.includes(sha256(session)), 'session digest (an SQL parameter) found in the logs');
        assert.doesNotMatch(all, /params:|Failed query|select "|insert into/i, 'SQL in the logs');
        assert.match(all, /identity provider: dependency unavailable/);
      } finally {
        await svc.stop().catch(() => {});
        await db.drop().catch(() => {});
      }
    },
  );
});

describe('sign-in throttle across two instances sharing PostgreSQL and Redis', () => {
  const why = !pgUp ? PG_SKIP : !redisUp ? REDIS_SKIP : null;

  test(
    '12 guesses at one account from 12 addresses over two instances: 10 evaluated, then 429 with Retry-After',
    { skip: why ?? false },
    async () => {
      const db = await createTempPgDatabase();
      const cfg = testConfig({ DATABASE_URL: db.url, REDIS_URL, AUTH_SECRET: 't'.repeat(40) });
      const [a, b] = await Promise.all([
        createService(cfg, { publicUrl: 'http://idp.multi.test' }),
        createService(cfg, { publicUrl: 'http://idp.multi.test' }),
      ]);
      try {
        await Promise.all([a.app.ready(), b.app.ready()]);
        const email = `victim.${Date.now()}.${process.pid}@example.com`;
        const password = 'granite willow echo 3';
        assert.equal((await post(a, '/auth/sign-up/email', { name: 'Vic', email, password })).status, 200);
        const statuses: number[] = [];
        let refused: Awaited<ReturnType<typeof post>> | undefined;
        for (let i = 0; i < 12; i++) {
          // Upper-case variants are the same account.
          const r = await post(i % 2 ? a : b, '/auth/sign-in/email', {
            email: i % 3 ? email : email.toUpperCase(),
            password: `guess number ${i}`,
          });
          statuses.push(r.status);
          if (r.status === 429) refused = r;
        }
        assert.equal(SIGNIN_ACCOUNT_LIMIT.points, 10);
        assert.deepEqual(statuses, [...Array(10).fill(401), 429, 429]);
        assert.ok(refused);
        assert.equal(refused.body.status, 'error');
        assert.equal(refused.body.error.code, 'RATE_LIMITED');
        assert.match(refused.body.error.message, /Too many sign-in attempts for this account; try again in \d+ seconds/);
        const retry = Number(refused.headers['retry-after']);
        assert.ok(retry >= 1 && retry <= SIGNIN_ACCOUNT_LIMIT.durationSec, String(retry));
        assert.equal(refused.body.error.details.retry_after, retry);
        // A form-encoded body (which better-auth would also accept) or a path variant cannot skip
        // the per-account count: it is refused before anything is evaluated.
        const form = await a.app.inject({
          method: 'POST',
          url: '/auth/sign-in/email',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `email=${encodeURIComponent(email)}&password=${encodeURIComponent(password)}`,
          remoteAddress: freshIp(),
        });
        assert.equal(form.statusCode, 400, form.body);
        assert.equal(form.json().error.code, 'INVALID_PARAMETER');
        assert.equal((await post(a, '/auth/sign-in/email/', { email, password })).status, 429);
        // The right password is refused too while the account is throttled (the guess is never evaluated).
        assert.equal((await post(a, '/auth/sign-in/email', { email, password })).status, 429);
        // Another account is not affected.
        const other = `other.${Date.now()}.${process.pid}@example.com`;
        assert.equal((await post(b, '/auth/sign-up/email', { name: 'Oth', email: other, password })).status, 200);
        assert.equal((await post(b, '/auth/sign-in/email', { email: other, password })).status, 200);
      } finally {
        await a.stop().catch(() => {});
        await b.stop().catch(() => {});
        await db.drop().catch(() => {});
      }
    },
  );
});
