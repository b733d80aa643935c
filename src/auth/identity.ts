import { createHash } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { betterAuth } from 'better-auth';
import { drizzleAdapter } from 'better-auth/adapters/drizzle';
import { symmetricDecrypt } from 'better-auth/crypto';
import { fromNodeHeaders } from 'better-auth/node';
import { bearer } from 'better-auth/plugins/bearer';
import { jwt } from 'better-auth/plugins/jwt';
import { eq } from 'drizzle-orm';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { AUTH_MODELS, authJwks, authSchema } from '../store/auth-schema.ts';
import type { Db } from '../store/db.ts';

/** Where better-auth's endpoints are mounted (`/auth/sign-in/email`, `/auth/token`, `/auth/jwks`, ...). */
export const AUTH_BASE_PATH = '/auth';

/** Signature algorithm of the JWTs the embedded identity provider issues (in the verifier's allow-list, see jwt.ts). */
export const IDP_JWT_ALG = 'ES256';

/** Lifetime of an issued JWT. */
export const IDP_JWT_TTL = '15m';

/** Largest request body accepted on /auth/* (sign-up, sign-in): 64 KiB. */
const AUTH_BODY_LIMIT = 64 * 1024;

/**
 * Header carrying the client address (Fastify's `req.ip`, which honours TRUST_PROXY) to
 * better-auth, for its per-IP rate limits and the session's `ip_address`. Any value a client
 * sends under this name is dropped first, so it cannot be spoofed.
 */
const CLIENT_IP_HEADER = 'x-identity-client-ip';

/** Request headers not forwarded to better-auth (hop-by-hop, or recomputed from the body). */
const DROPPED_REQUEST_HEADERS = ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', CLIENT_IP_HEADER];

/** Response headers not copied back (Fastify computes them). */
const DROPPED_RESPONSE_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'set-cookie']);

/** What registerIdentityProvider returns: enough to build the verifier of its JWTs (jwt.ts). */
export interface IdentityProvider {
  /** `iss` of every JWT, equal to the `issuer` of the discovery document: the service's public URL. */
  issuer: string;
  /** `aud` of every JWT. */
  audience: string;
  /** The provider's public keys, read from the database in process (no HTTP round-trip). */
  jwks: JWTVerifyGetKey;
}

/**
 * Mounts the embedded identity provider (better-auth 1.7) on the app, for deployments
 * without an external one (AUTH_ISSUER unset):
 *
 * - `POST /auth/sign-up/email` `{name, email, password}` creates an account and signs it in;
 *   `POST /auth/sign-in/email` `{email, password}` signs in. Both answer
 *   `{token, user}` (token: the opaque session token, also in the `set-auth-token` header and
 *   the session cookie). Passwords are 8 to 128 characters, hashed with scrypt (better-auth's
 *   default: node:crypto scrypt, random salt, stored as `salt:key` hex in
 *   `auth_account.password`); the password itself is never stored. Emails are not verified.
 * - `GET /auth/token` with the session (cookie, or `Authorization: Bearer <session token>`
 *   through better-auth's bearer plugin) answers `{token: <JWT>}`; `GET /auth/get-session`
 *   also returns a fresh JWT in its `set-auth-jwt` header. The JWT (RFC 7519) is signed
 *   ES256 with a key kept in `auth_jwks` (private part encrypted with `secret`) and carries
 *   `iss` = the issuer below, `aud` = `audience`, `sub` = the user id, `email`, `iat`, and
 *   `exp` = 15 minutes later. It is what `POST /api/v1/keys/create` (and the other
 *   JWT-only routes) take as `Authorization: Bearer <JWT>`.
 * - `GET /auth/jwks` publishes the public keys (JWKS); `GET /.well-known/openid-configuration`
 *   (OpenID Connect Discovery 1.0, JWKS part only: this is not a full OpenID Provider) gives
 *   `{issuer, jwks_uri}`, so `createJwtVerifier({issuer, audience})` works by discovery, as
 *   with an external provider.
 * - `GET /signin`: a page to sign up / sign in, get the JWT and copy a curl command that
 *   creates an API key.
 *
 * The issuer is `baseUrl` (the service's public origin, PUBLIC_URL): discovery is then at
 * `<baseUrl>/.well-known/openid-configuration` as OIDC Discovery requires. Browsers must use
 * this origin (or a loopback alias of it): better-auth refuses browser POSTs and
 * cookie-carrying requests from other origins (CSRF). better-auth's rate limits are on
 * (whatever NODE_ENV), in memory per instance, per client IP (`req.ip`: behind a proxy, set
 * TRUST_PROXY): 3 requests per 10 s on sign-in / sign-up, 100 per 10 s elsewhere under /auth.
 *
 * At start, signing keys that `secret` cannot decrypt (the secret changed, e.g. a generated
 * one with PostgreSQL) are retired: set to expire now, so a new key is created on the next
 * token, while the old public key stays published for better-auth's grace period (30 days)
 * and earlier tokens still verify. Instances sharing a database must share the secret.
 *
 * @param opts.db the app's drizzle database (PGlite or PostgreSQL), migrated with the `auth_*` tables.
 * @param opts.baseUrl public origin of the service, without trailing slash, e.g. `http://127.0.0.1:3000`.
 * @param opts.secret better-auth secret (>= 32 characters): signs cookies, encrypts the signing keys.
 * @param opts.audience `aud` of the issued JWTs (AUTH_AUDIENCE).
 * @returns issuer, audience and the key getter to verify the JWTs it issues.
 * @throws when the database cannot be read (e.g. the migrations did not run).
 */
export async function registerIdentityProvider(
  app: FastifyInstance,
  opts: { db: Db; baseUrl: string; secret: string; audience: string },
): Promise<IdentityProvider> {
  const baseUrl = opts.baseUrl.replace(/\/+$/, '');
  const origin = new URL(baseUrl).origin;
  const issuer = baseUrl;
  const log = app.log.child({ component: 'identity' });

  const auth = betterAuth({
    appName: 'Market Intelligence API',
    baseURL: baseUrl,
    basePath: AUTH_BASE_PATH,
    secret: opts.secret,
    trustedOrigins: trustedOrigins(baseUrl),
    telemetry: { enabled: false },
    database: drizzleAdapter(opts.db, { provider: 'pg', schema: authSchema }),
    user: { modelName: AUTH_MODELS.user },
    session: { modelName: AUTH_MODELS.session },
    account: { modelName: AUTH_MODELS.account },
    verification: { modelName: AUTH_MODELS.verification },
    emailAndPassword: { enabled: true, autoSignIn: true, minPasswordLength: 8, maxPasswordLength: 128 },
    rateLimit: { enabled: true, storage: 'memory' },
    advanced: { ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] } },
    // No `level`: better-auth's default (warn); setting one would also echo API errors to the console.
    logger: {
      log: (level, message, ...args) => {
        const err = args.find((a) => a instanceof Error);
        log[level](err ? { err } : {}, message);
      },
    },
    plugins: [
      jwt({
        jwks: { keyPairConfig: { alg: IDP_JWT_ALG } },
        jwt: {
          issuer,
          audience: opts.audience,
          expirationTime: IDP_JWT_TTL,
          // Only what the API needs; `sub` (the user id) is added by the plugin.
          definePayload: ({ user }) => ({ email: user.email }),
        },
        schema: { jwks: { modelName: AUTH_MODELS.jwks } },
      }),
      bearer(),
    ],
  });

  const ctx = await auth.$context;
  await retireUndecryptableKeys(opts.db, ctx.secretConfig, log);

  await app.register(async (scope) => {
    // better-auth parses the body itself: hand it the raw bytes, whatever the content type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: AUTH_BODY_LIMIT }, (_req, body, done) => done(null, body));

    scope.route({
      method: ['GET', 'POST'],
      url: `${AUTH_BASE_PATH}/*`,
      schema: { hide: true },
      handler: async (req, reply) => {
        const headers = fromNodeHeaders(req.headers);
        for (const h of DROPPED_REQUEST_HEADERS) headers.delete(h);
        headers.set(CLIENT_IP_HEADER, req.ip);
        const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : (req.body as Buffer | undefined);
        // The URL is built on the configured origin, never on the client's Host header.
        const request = new Request(`${origin}${req.url}`, {
          method: req.method,
          headers,
          body: body && body.length > 0 ? new Uint8Array(body) : undefined,
        });
        const res = await auth.handler(request);
        reply.status(res.status);
        res.headers.forEach((value, key) => {
          if (!DROPPED_RESPONSE_HEADERS.has(key)) reply.header(key, value);
        });
        const cookies = res.headers.getSetCookie();
        if (cookies.length > 0) reply.header('set-cookie', cookies);
        reply.header('cache-control', 'no-store');
        return reply.send(res.body ? Buffer.from(await res.arrayBuffer()) : null);
      },
    });

    const discovery = JSON.stringify({
      issuer,
      jwks_uri: `${baseUrl}${AUTH_BASE_PATH}/jwks`,
      id_token_signing_alg_values_supported: [IDP_JWT_ALG],
      subject_types_supported: ['public'],
      claims_supported: ['iss', 'aud', 'sub', 'email', 'iat', 'exp'],
      service_documentation: `${baseUrl}/signin`,
    });
    scope.get('/.well-known/openid-configuration', { schema: { hide: true } }, async (_req, reply) =>
      reply.header('cache-control', 'public, max-age=300').type('application/json; charset=utf-8').send(discovery),
    );

    scope.get('/signin', { schema: { hide: true } }, async (_req, reply) =>
      reply
        .header('content-security-policy', SIGNIN_CSP)
        .header('cache-control', 'no-store')
        .header('x-frame-options', 'DENY')
        .header('referrer-policy', 'no-referrer')
        .header('x-content-type-options', 'nosniff')
        .type('text/html; charset=utf-8')
        .send(SIGNIN_HTML),
    );
  });

  const jwks = localJwks(async () => (await auth.api.getJwks()) as JSONWebKeySet);
  return { issuer, audience: opts.audience, jwks };
}

/**
 * Origins whose browser requests better-auth accepts: the public origin and, when it is a
 * loopback or bind-all address, its loopback aliases on the same port (so /signin works from
 * http://localhost:3000 as well as http://127.0.0.1:3000 in development).
 */
function trustedOrigins(baseUrl: string): string[] {
  const url = new URL(baseUrl);
  const out = new Set([url.origin]);
  if (['127.0.0.1', 'localhost', '[::1]', '0.0.0.0', '[::]'].includes(url.hostname)) {
    for (const host of ['127.0.0.1', 'localhost', '[::1]']) out.add(`${url.protocol}//${host}${url.port ? `:${url.port}` : ''}`);
  }
  return [...out];
}

/**
 * Sets `expires_at = now` on the live signing keys whose private part the current secret
 * cannot decrypt, so better-auth creates a new key instead of failing to sign; their public
 * parts stay published during the grace period.
 */
async function retireUndecryptableKeys(db: Db, secret: Parameters<typeof symmetricDecrypt>[0]['key'], log: FastifyBaseLogger): Promise<void> {
  const now = new Date();
  for (const row of await db.select().from(authJwks)) {
    if (row.expiresAt && row.expiresAt <= now) continue;
    try {
      await symmetricDecrypt({ key: secret, data: JSON.parse(row.privateKey) as string });
    } catch {
      await db.update(authJwks).set({ expiresAt: now }).where(eq(authJwks.id, row.id));
      log.warn({ kid: row.id }, 'identity provider: a signing key cannot be decrypted with the current secret (AUTH_SECRET changed?); retired it, a new key will be created. Set AUTH_SECRET to keep keys and sessions across restarts.');
    }
  }
}

/**
 * A jose key getter over a JWKS loaded in process by `load`: cached up to `maxAgeMs`, and
 * reloaded when a token names an unknown `kid` (a key created since), at most once per
 * `minReloadMs` (concurrent reloads are shared, so a flood of unknown kids costs one load
 * per interval).
 */
export function localJwks(load: () => Promise<JSONWebKeySet>, opts: { maxAgeMs?: number; minReloadMs?: number } = {}): JWTVerifyGetKey {
  const maxAgeMs = opts.maxAgeMs ?? 5 * 60_000;
  const minReloadMs = opts.minReloadMs ?? 1000;
  type Loaded = { getKey: ReturnType<typeof createLocalJWKSet>; loadedAt: number };
  let current: Loaded | null = null;
  let inflight: Promise<Loaded> | null = null;
  const reload = (): Promise<Loaded> =>
    (inflight ??= (async () => {
      const wait = (current?.loadedAt ?? 0) + minReloadMs - Date.now();
      if (wait > 0) await delay(wait);
      const loaded = { getKey: createLocalJWKSet(await load()), loadedAt: Date.now() };
      current = loaded;
      return loaded;
    })().finally(() => {
      inflight = null;
    }));
  return async (header, token) => {
    const cached = current && Date.now() - current.loadedAt < maxAgeMs ? current : await reload();
    try {
      return await cached.getKey(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
      return (await reload()).getKey(header, token);
    }
  };
}

const SIGNIN_STYLE = `
body{font:16px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
main{max-width:44rem;margin:3rem auto;padding:0 1rem}
h1{font-size:1.4rem;margin:0 0 .25rem}
p.lead{margin:0 0 1.5rem;color:#556}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:1.25rem 1.5rem;margin-bottom:1rem}
label{display:block;margin:.6rem 0;font-weight:600;font-size:.9rem}
input{display:block;width:100%;box-sizing:border-box;padding:.5rem .6rem;margin-top:.25rem;font:inherit;border:1px solid #c4cad3;border-radius:6px}
.row{display:flex;gap:.5rem;flex-wrap:wrap;margin-top:1rem}
button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid #2f5bd3;background:#2f5bd3;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#2f5bd3}
textarea,pre{width:100%;box-sizing:border-box;font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f1f3f6;border:1px solid #dde1e7;border-radius:6px;padding:.6rem;word-break:break-all;white-space:pre-wrap}
#msg{min-height:1.5em;color:#b42318}
#msg.ok{color:#1a7f37}
`;

const SIGNIN_SCRIPT = `
(function () {
  var $ = function (id) { return document.getElementById(id); };
  function say(text, ok) { var m = $('msg'); m.textContent = text; m.className = ok ? 'ok' : ''; }
  function call(path, init) {
    return fetch(path, Object.assign({ credentials: 'same-origin' }, init || {})).then(function (res) {
      return res.json().catch(function () { return null; }).then(function (body) { return { res: res, body: body }; });
    });
  }
  function claimsOf(jwt) {
    var b = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    while (b.length % 4) b += '=';
    return JSON.parse(atob(b));
  }
  function showToken() {
    return call('/auth/token').then(function (r) {
      if (!r.res.ok || !r.body || typeof r.body.token !== 'string') return false;
      var jwt = r.body.token, c = claimsOf(jwt);
      $('who').textContent = c.email || c.sub;
      $('exp').textContent = new Date(c.exp * 1000).toLocaleTimeString();
      $('jwt').value = jwt;
      $('curl').textContent = "curl -X POST '" + location.origin + "/api/v1/keys/create' \\\\\\n" +
        "  -H 'Authorization: Bearer " + jwt + "' \\\\\\n" +
        "  -H 'Content-Type: application/json' \\\\\\n" +
        "  -d '{\\"name\\":\\"my-key\\"}'";
      $('signed-out').hidden = true;
      $('signed-in').hidden = false;
      return true;
    });
  }
  function submit(kind) {
    var form = $('form');
    if (!form.reportValidity()) return;
    var email = $('email').value.trim(), password = $('password').value;
    var body = kind === 'up' ? { name: $('name').value.trim() || email.split('@')[0], email: email, password: password } : { email: email, password: password };
    say('Working...', true);
    call('/auth/' + (kind === 'up' ? 'sign-up' : 'sign-in') + '/email', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body)
    }).then(function (r) {
      if (!r.res.ok) { say((r.body && r.body.message) || ('Failed (HTTP ' + r.res.status + ')')); return; }
      $('password').value = '';
      say('', true);
      return showToken().then(function (ok) { if (!ok) say('Signed in, but no JWT could be obtained.'); });
    }).catch(function () { say('Network error'); });
  }
  function copy(text, what) {
    navigator.clipboard.writeText(text).then(function () { say(what + ' copied', true); }, function () { say('Copy failed: select the text and copy it'); });
  }
  $('form').addEventListener('submit', function (e) { e.preventDefault(); submit('in'); });
  $('signup').addEventListener('click', function () { submit('up'); });
  $('copy').addEventListener('click', function () { copy($('jwt').value, 'JWT'); });
  $('copycurl').addEventListener('click', function () { copy($('curl').textContent, 'Command'); });
  $('refresh').addEventListener('click', function () { showToken(); });
  $('signout').addEventListener('click', function () {
    call('/auth/sign-out', { method: 'POST' }).then(function () {
      $('jwt').value = ''; $('curl').textContent = '';
      $('signed-in').hidden = true; $('signed-out').hidden = false; say('Signed out', true);
    });
  });
  showToken().catch(function () {});
})();
`;

/** The sign-in page: static HTML, inline style and script (no CDN), pinned by CSP hashes. */
const SIGNIN_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in - Market Intelligence API</title>
<style>${SIGNIN_STYLE}</style>
</head>
<body>
<main>
<h1>Market Intelligence API</h1>
<p class="lead">Sign in to get a JWT, then create API keys with it.</p>
<section id="signed-out">
<form id="form">
<label>Email <input id="email" type="email" autocomplete="username" required maxlength="254"></label>
<label>Password (8 to 128 characters) <input id="password" type="password" autocomplete="current-password" required minlength="8" maxlength="128"></label>
<label>Name (for a new account, optional) <input id="name" type="text" autocomplete="name" maxlength="64"></label>
<div class="row"><button type="submit">Sign in</button><button type="button" id="signup" class="secondary">Create account</button></div>
</form>
</section>
<section id="signed-in" hidden>
<p>Signed in as <strong id="who"></strong>. Your JWT (valid 15 minutes, until <span id="exp"></span>):</p>
<textarea id="jwt" rows="6" readonly></textarea>
<div class="row"><button type="button" id="copy">Copy JWT</button><button type="button" id="refresh" class="secondary">New JWT</button><button type="button" id="signout" class="secondary">Sign out</button></div>
<p>Create an API key (the key is shown once):</p>
<pre id="curl"></pre>
<div class="row"><button type="button" id="copycurl">Copy command</button></div>
</section>
<p id="msg" role="status"></p>
</main>
<script>${SIGNIN_SCRIPT}</script>
</body>
</html>
`;

const sha256 = (s: string) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`;

/** Only the page's own inline script and style run; fetches go to this origin only. */
const SIGNIN_CSP = [
  "default-src 'none'",
  `script-src ${sha256(SIGNIN_SCRIPT)}`,
  `style-src ${sha256(SIGNIN_STYLE)}`,
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');
