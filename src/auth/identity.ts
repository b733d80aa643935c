import { setTimeout as delay } from 'node:timers/promises';
import { betterAuth } from 'better-auth';
import { drizzleAdapter } from 'better-auth/adapters/drizzle';
import { symmetricDecrypt } from 'better-auth/crypto';
import { bearer } from 'better-auth/plugins/bearer';
import { jwt } from 'better-auth/plugins/jwt';
import { createAuthMiddleware } from 'better-auth/api';
import { APIError } from 'better-auth';
import { and, eq, ne, sql } from 'drizzle-orm';
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type { Logger } from 'pino';
import { DATABASE_DOWN_MESSAGE, isDependencyDown, OutageLog, ServiceError, unavailable } from '../errors.ts';
import { AUTH_MODELS, authJwks, authSchema, authSession } from '../store/auth-schema.ts';
import type { Db } from '../store/db.ts';
import { betterAuthStorages, ContextGate } from './context-gate.ts';
import { IdentityProviderUnavailableError } from './jwt-check.ts';
import { AUTH_BASE_PATH, CLIENT_IP_HEADER, discoveryDocument, type EmbeddedIdentity, IDP_JWT_ALG } from './identity-lazy.ts';
import { passwordProblem } from './password-policy.ts';
import {
  digestSessionTokens,
  IdentityDatabaseError,
  SESSION_DIGEST_PATTERN,
  sessionTokenDigest,
  trackDatabase,
  trackingStorage,
} from './session-store.ts';

// Re-exported for the modules that build on the provider (its constants and interface live in identity-lazy.ts).
export { AUTH_BASE_PATH, CLIENT_IP_HEADER, type EmbeddedIdentity, IDP_JWT_ALG } from './identity-lazy.ts';

/** Lifetime of an issued JWT. */
export const IDP_JWT_TTL = '15m';

/** Longest message of the identity provider's that is logged whole, characters. */
const LOGGED_MESSAGE_MAX = 300;

/**
 * Builds the embedded identity provider (better-auth 1.7), for deployments without an
 * external one (AUTH_ISSUER unset); the HTTP edge mounts its routes (src/http/identity.ts):
 *
 * - `POST /auth/sign-up/email` `{name, email, password}` creates an account; it answers
 *   `{token: null, user}` alike for a new and an existing email (no account enumeration; an
 *   existing account is left unchanged), so the client then signs in.
 *   `POST /auth/sign-in/email` `{email, password}` signs in and answers `{token, user}`
 *   (token: the opaque session token, also in the `set-auth-token` header and the session
 *   cookie; stored only as its SHA-256 digest, see session-store.ts). Passwords follow
 *   password-policy.ts (8 to 128 characters, not common, trivial, the email or the name;
 *   otherwise 400 `{code: "PASSWORD_TOO_WEAK", message}`), hashed with scrypt (better-auth's
 *   default: node:crypto scrypt, random salt, stored as `salt:key` hex in
 *   `auth_account.password`); the password itself is never stored. Emails are not verified.
 * - Errors: while the database is unreachable, `handler` throws a ServiceError
 *   SERVICE_UNAVAILABLE (whatever better-auth would have answered); on any other unexpected
 *   error, INTERNAL_ERROR. The log gets JSON lines without SQL, parameters, tokens or emails.
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
 * - `GET /signin`: the dashboard's page to sign up / sign in; the dashboard then takes the
 *   JWT from `/auth/token` itself (its API keys section at `/account`). Scripts call
 *   `/auth/sign-in/email` and `/auth/token` (README, "API keys").
 *
 * The issuer is `baseUrl` (the service's public origin, PUBLIC_URL): discovery is then at
 * `<baseUrl>/.well-known/openid-configuration` as OIDC Discovery requires. Browsers must use
 * this origin (or a loopback alias of it): better-auth refuses browser POSTs and
 * cookie-carrying requests from other origins (CSRF). better-auth's rate limits are on
 * (whatever NODE_ENV), in memory per instance, per client IP (`req.ip`: behind a proxy, set
 * TRUST_PROXY): 10 requests per 60 s on sign-in / sign-up (`customRules` below; better-auth's
 * own rule, 3 per 10 s, refused a person's fourth try), 100 per 10 s elsewhere under /auth.
 *
 * When it is created (src/server.ts: once the service listens, or on first use; see
 * identity-lazy.ts), signing keys that `secret` cannot decrypt (the secret changed, e.g. a generated
 * one with PostgreSQL) are retired: set to expire now, so a new key is created on the next
 * token, while the old public key stays published for better-auth's grace period (30 days)
 * and earlier tokens still verify. Instances sharing a database must share the secret.
 *
 * @param opts.db the app's drizzle database (PGlite or PostgreSQL), migrated with the `auth_*` tables.
 * @param opts.jobsDb the same database on the job connections (start-up clean-ups may outlast a request's statement timeout).
 * @param opts.baseUrl public origin of the service, without trailing slash, e.g. `http://127.0.0.1:3000`.
 * @param opts.secret better-auth secret (>= 32 characters): signs cookies, encrypts the signing keys.
 * @param opts.audience `aud` of the issued JWTs (AUTH_AUDIENCE).
 * @param opts.log the process logger (better-auth's messages go through it, as JSON).
 * @returns the request handler, the discovery document, issuer, audience and the key getter
 *   to verify the JWTs it issues.
 * @param opts.sharedDatabase true on PostgreSQL: see retireUndecryptableKeys.
 * @throws when the database cannot be read (e.g. the migrations did not run);
 *   AuthSecretMismatchError on a shared database whose live signing key this secret cannot decrypt.
 */
export async function createEmbeddedIdentity(opts: {
  db: Db;
  /** Connections for start-up work whose statements may take longer than a request's (default `db`). */
  jobsDb?: Db;
  baseUrl: string;
  secret: string;
  audience: string;
  log: Logger;
  /** True on PostgreSQL (instances may share the database): a signing key this secret cannot decrypt is refused, not retired (AuthSecretMismatchError). */
  sharedDatabase?: boolean;
}): Promise<EmbeddedIdentity> {
  const baseUrl = opts.baseUrl.replace(/\/+$/, '');
  const origin = new URL(baseUrl).origin;
  const issuer = baseUrl;
  const log = opts.log.child({ component: 'identity' });
  // Every call into better-auth goes through the gate: its AsyncLocalStorages (and ours) are
  // switched off whenever no identity work is in flight, so keyed API requests do not pay
  // for them after a sign-in (context-gate.ts).
  const gate = new ContextGate(() => [...betterAuthStorages(), trackingStorage]);

  const auth = betterAuth({
    appName: 'Market Intelligence API',
    baseURL: baseUrl,
    basePath: AUTH_BASE_PATH,
    secret: opts.secret,
    trustedOrigins: trustedOrigins(baseUrl),
    telemetry: { enabled: false },
    // Session tokens are stored as SHA-256 digests; driver errors are sanitized (session-store.ts).
    // `transaction: true`: better-auth's multi-write steps (sign-up's user and credential rows,
    // a password change with its session revocations) run in one database transaction. The
    // adapter's default (false) wrote them one by one, so a sign-up whose credential insert
    // failed (a timeout, a lost connection) left the user without a password: the email was
    // taken for good (sign-up answers as for an existing account, sign-in is refused).
    database: digestSessionTokens(drizzleAdapter(opts.db, { provider: 'pg', schema: authSchema, transaction: true })),
    user: { modelName: AUTH_MODELS.user },
    session: { modelName: AUTH_MODELS.session },
    account: { modelName: AUTH_MODELS.account },
    verification: { modelName: AUTH_MODELS.verification },
    // autoSignIn off: sign-up answers `{token: null, user}` alike for a new and an existing
    // email (better-auth's generic duplicate response), so it does not reveal which emails exist.
    emailAndPassword: { enabled: true, autoSignIn: false, minPasswordLength: 8, maxPasswordLength: 128 },
    // better-auth's burst rule for sign-in and sign-up (3 per 10 s per address and instance)
    // refused a person's fourth try, e.g. three passwords rejected as too weak and then a good
    // one. The service's own throttle (src/http/identity.ts: 10 per account and 30 per address
    // per 15 minutes, shared through Redis) is the limit that counts; this stays as a
    // per-instance net against bursts.
    rateLimit: {
      enabled: true,
      storage: 'memory',
      customRules: { '/sign-in/email': { window: 60, max: 10 }, '/sign-up/email': { window: 60, max: 10 } },
    },
    advanced: {
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      // Work better-auth leaves running after a response keeps its storages on until it settles.
      backgroundTasks: {
        handler: (work) => gate.track(work, (err) => log.error({ err: safeError(err) }, 'identity provider: background task failed')),
      },
    },
    // No `level`: better-auth's default (warn); setting one would also echo API errors to the console.
    logger: {
      log: (level, message, ...args) => {
        const err = args.find((a) => a instanceof Error);
        // better-auth reports a refused client request (an invalid callbackURL, Origin or OAuth
        // state) at error level with the client's values in the text: the client's mistake, not
        // the service's, so a warning, and at most LOGGED_MESSAGE_MAX characters of it, so that
        // anonymous requests cannot fill the error log with lines of their own making.
        // Sign-ups of one email racing each other: the losers' user insert fails on the unique
        // email (SQLSTATE 23505) and better-auth logs it as an error; they get the duplicate
        // answer (signUp below), so it is a warning, not a fault of the service.
        const raced = err instanceof IdentityDatabaseError && err.code === '23505';
        const text = redact(message);
        const short = text.length > LOGGED_MESSAGE_MAX ? `${text.slice(0, LOGGED_MESSAGE_MAX)}… (${text.length} characters)` : text;
        log[level === 'error' && (!err || raced) ? 'warn' : level](err ? { err: safeError(err) } : {}, short);
      },
    },
    // Unexpected errors are thrown to `handler` below (logged there, as JSON and without
    // internals) instead of better-call's console.error and an empty 500.
    onAPIError: { throw: true },
    hooks: {
      before: createAuthMiddleware(async (ctx) => {
        const field = PASSWORD_FIELDS[ctx.path];
        if (!field) return;
        const body = (ctx.body ?? {}) as Record<string, unknown>;
        const password = body[field];
        if (typeof password !== 'string') return;
        // Sign-up names the account in its body; a signed-in password change is checked against
        // the session's user (a reset by token has neither: only the generic rules apply).
        const user =
          typeof body.email === 'string' || !ctx.headers
            ? null
            : ((await auth.api.getSession({ headers: ctx.headers }).catch(() => null))?.user ?? null);
        const problem = await passwordProblem(password, {
          email: typeof body.email === 'string' ? body.email : (user?.email ?? undefined),
          name: typeof body.name === 'string' ? body.name : (user?.name ?? undefined),
        });
        if (problem) throw new APIError('BAD_REQUEST', { code: 'PASSWORD_TOO_WEAK', message: problem });
      }),
    },
    plugins: [
      jwt({
        jwks: { keyPairConfig: { alg: IDP_JWT_ALG } },
        jwt: {
          issuer,
          audience: opts.audience,
          expirationTime: IDP_JWT_TTL,
          // Only what the API needs; `sub` (the user id) is added by the plugin. `sid`, the
          // sign-in session's id (not its token), lets the API refuse the JWT once that session
          // has ended (signed out or revoked) instead of for the rest of its 15 minutes
          // (src/server.ts `lazyJwtVerifier`).
          definePayload: ({ user, session }) => ({ email: user.email, sid: session.id }),
        },
        schema: { jwks: { modelName: AUTH_MODELS.jwks } },
      }),
      bearer(),
    ],
  });

  const startup = opts.jobsDb ?? opts.db;
  await gate.run(async () => {
    const ctx = await auth.$context;
    await retireUndecryptableKeys(startup, ctx.secretConfig, log, opts.sharedDatabase ?? false);
    // Sessions stored in clear before digests: unusable now (lookups digest the token); removed.
    await startup.delete(authSession).where(sql`${authSession.token} !~ ${SESSION_DIGEST_PATTERN}`);
  });

  const discovery = discoveryDocument(baseUrl);

  const jwks = localJwks(() => gate.run(async () => (await auth.api.getJwks()) as JSONWebKeySet));
  const trusted = new Set(trustedOrigins(baseUrl));
  const outage = new OutageLog();
  /**
   * Revoking sessions by what `list-sessions` shows of them. Stored tokens are digests, and a
   * user's session list carries the digest, not the token (no credential in it). better-auth's
   * `revoke-session` with that value digested it again and matched nothing, yet answered
   * `{status: true}`; `revoke-other-sessions` compared digests with the caller's clear token,
   * matched nothing and answered the same. Both are done here: the caller's session is checked
   * by better-auth, then the rows are deleted by digest, only among the caller's own sessions.
   * `revoke-session` with any other string (a clear token, e.g. the caller's own) is digested
   * first; better-auth answered `{status: true}` for one that matched none of the caller's.
   * @returns null when better-auth should answer the request itself.
   */
  const revokeByDigest = async (request: Request): Promise<Response | null> => {
    if (request.method !== 'POST') return null;
    const path = new URL(request.url).pathname.replace(/\/+$/, '').toLowerCase();
    const one = path === `${AUTH_BASE_PATH}/revoke-session`;
    if (!one && path !== `${AUTH_BASE_PATH}/revoke-other-sessions`) return null;
    // better-auth's own checks, kept: anything but a JSON body, and a cookie-carrying request
    // from an origin it does not trust (CSRF: a same-site page's form POST), go to better-auth,
    // which refuses them.
    const type = (request.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') return null;
    const from = request.headers.get('origin');
    if (request.headers.has('cookie') && from !== null && !trusted.has(from)) return null;
    let target: string | null = null;
    if (one) {
      const body = (await request
        .clone()
        .json()
        .catch(() => null)) as { token?: unknown } | null;
      if (typeof body?.token !== 'string') return null;
      target = DIGEST.test(body.token) ? body.token : sessionTokenDigest(body.token);
    }
    const session = await auth.api.getSession({ headers: request.headers });
    if (!session) return Response.json({ code: 'UNAUTHORIZED', message: 'Unauthorized' }, { status: 401 });
    const mine = eq(authSession.userId, session.user.id);
    const current = sessionTokenDigest(session.session.token);
    const removed = await opts.db
      .delete(authSession)
      .where(target === null ? and(mine, ne(authSession.token, current)) : and(mine, eq(authSession.token, target)))
      .returning({ id: authSession.id });
    // One session: whether it was one of the caller's (false: no such session, nothing done).
    return Response.json({ status: target === null || removed.length > 0 });
  };
  /**
   * A sign-up that lost a race for its email: sign-ups of one email at the same moment each
   * find no account, then all but one fail on the unique email (PostgreSQL; on PGlite the
   * transactions run one at a time), and better-auth answered those 422 FAILED_TO_CREATE_USER,
   * which told that the email had just been taken. Asked again, better-auth finds the account
   * and gives the answer of any duplicate sign-up (`{token: null, user}`, README: it does not
   * tell which emails exist). Asked through `auth.api`, so the retry does not count against
   * better-auth's burst limit (a client would see a 429 a later duplicate does not get).
   */
  const signUp = async (request: Request): Promise<Response> => {
    const body = (await request
      .clone()
      .json()
      .catch(() => null)) as Record<string, unknown> | null;
    const res = await auth.handler(request);
    if (res.status !== 422 || body === null) return res;
    const { code } = (await res
      .clone()
      .json()
      .catch(() => ({}))) as { code?: unknown };
    if (code !== 'FAILED_TO_CREATE_USER') return res;
    await res.body?.cancel().catch(() => {});
    return auth.api.signUpEmail({ body: body as never, headers: request.headers, asResponse: true });
  };
  const isSignUp = (request: Request) =>
    request.method === 'POST' && new URL(request.url).pathname.replace(/\/+$/, '').toLowerCase() === `${AUTH_BASE_PATH}/sign-up/email`;
  const handler = async (request: Request): Promise<Response> => {
    let outcome: { result: Response | null; databaseDown: boolean; err?: unknown };
    try {
      outcome = await gate.run(() =>
        trackDatabase(async () => (await revokeByDigest(request)) ?? (isSignUp(request) ? signUp(request) : auth.handler(request))),
      );
    } catch (err) {
      outcome = { result: null, databaseDown: (err instanceof IdentityDatabaseError && err.unavailable) || isDependencyDown(err), err };
    }
    if (outcome.databaseDown) {
      await outcome.result?.body?.cancel().catch(() => {});
      // Once, then one line per 10 s while it lasts (errors.ts, OutageLog), at warning level.
      outage.error({ error: (o, m) => log.warn(o, m) }, undefined, 'identity provider: dependency unavailable (database)', {
        path: new URL(request.url).pathname,
      });
      throw unavailable(DATABASE_DOWN_MESSAGE);
    }
    if (!outcome.result) {
      log.error({ err: safeError(outcome.err), path: new URL(request.url).pathname }, 'identity provider: unexpected error');
      throw new ServiceError('INTERNAL_ERROR', 'Internal server error');
    }
    return outcome.result;
  };
  return { issuer, audience: opts.audience, origin, jwks, handler, discovery };
}

/** A stored session token (SESSION_DIGEST_PATTERN). */
const DIGEST = new RegExp(SESSION_DIGEST_PATTERN);

/** The body field holding a new password, per better-auth endpoint (checked by the password policy). */
const PASSWORD_FIELDS: Record<string, string> = {
  '/sign-up/email': 'password',
  '/change-password': 'newPassword',
  '/reset-password': 'newPassword',
  '/set-password': 'newPassword',
};

/** Emails in a log message, replaced by `[email]`. */
function redact(message: string): string {
  return message.replace(/[^\s@"'<>]+@[^\s@"'<>]+/g, '[email]');
}

/**
 * What of an error better-auth hands its logger goes to our log: its type, code and redacted
 * message; never the driver's message (SQL and parameters), the cause or the request.
 */
function safeError(err: unknown): { type: string; code?: string; message: string } {
  const e = err as { name?: unknown; code?: unknown; message?: unknown; status?: unknown };
  const type = typeof e?.name === 'string' ? e.name : 'Error';
  const code = typeof e?.code === 'string' ? e.code : undefined;
  // Driver errors (no IdentityDatabaseError around them) carry SQL and parameters: not logged.
  const raw = typeof e?.message === 'string' && !/Failed query|select |insert |update |delete |params/i.test(e.message) ? e.message : '';
  return { type, ...(code ? { code } : {}), message: redact(raw) };
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
 * The secret of this instance cannot decrypt the signing keys in a database other instances
 * share (PostgreSQL): its AUTH_SECRET differs from theirs. The message says what to do.
 */
export class AuthSecretMismatchError extends Error {
  override name = 'AuthSecretMismatchError';
}

/**
 * Sets `expires_at = now` on the live signing keys whose private part the current secret
 * cannot decrypt, so better-auth creates a new key instead of failing to sign; their public
 * parts stay published during the grace period. On a `shared` database (PostgreSQL, several
 * instances) such a key is most likely another instance's, made under the deployment's
 * AUTH_SECRET: retiring it would stop those instances from issuing tokens (they cannot
 * decrypt the key made here either), so nothing is changed and AuthSecretMismatchError is
 * thrown instead (the identity provider of this instance is then unavailable, logged).
 */
async function retireUndecryptableKeys(
  db: Db,
  secret: Parameters<typeof symmetricDecrypt>[0]['key'],
  log: Logger,
  shared: boolean,
): Promise<void> {
  const now = new Date();
  for (const row of await db.select().from(authJwks)) {
    if (row.expiresAt && row.expiresAt <= now) continue;
    try {
      await symmetricDecrypt({ key: secret, data: JSON.parse(row.privateKey) as string });
    } catch {
      if (shared)
        throw new AuthSecretMismatchError(
          `identity provider: AUTH_SECRET cannot decrypt the signing key ${row.id} in the shared database, which another instance made: give every instance the same AUTH_SECRET. ` +
            'To change the secret of the deployment on purpose, stop every instance, retire the live keys (SQL: UPDATE auth_jwks SET expires_at = now() WHERE expires_at IS NULL OR expires_at > now()), then start them all with the new secret.',
        );
      await db.update(authJwks).set({ expiresAt: now }).where(eq(authJwks.id, row.id));
      log.warn(
        { kid: row.id },
        'identity provider: a signing key cannot be decrypted with the current secret (AUTH_SECRET changed?); retired it, a new key will be created. Set AUTH_SECRET to keep keys and sessions across restarts.',
      );
    }
  }
}

/**
 * A jose key getter over a JWKS loaded in process by `load`: cached up to `maxAgeMs`, and
 * reloaded when a token names an unknown `kid` (a key created since), at most once per
 * `minReloadMs` (concurrent reloads are shared, so a flood of unknown kids costs one load
 * per interval). A failed load rejects with IdentityProviderUnavailableError (the verifier
 * answers 503).
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
      let set: JSONWebKeySet;
      try {
        set = await load();
      } catch {
        // The keys could not be read (the database down): the token cannot be checked now,
        // which is the service's fault, not the token's (503, not 401 "invalid token").
        throw new IdentityProviderUnavailableError("The identity provider's keys could not be read");
      }
      const loaded = { getKey: createLocalJWKSet(set), loadedAt: Date.now() };
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
