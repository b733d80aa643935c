import { createHash } from 'node:crypto';
import { pageHeaders } from './page-headers.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { fromNodeHeaders } from 'better-auth/node';
import { AUTH_BASE_PATH, CLIENT_IP_HEADER, type EmbeddedIdentity } from '../auth/identity-lazy.ts';
import { type ErrorCode, unexpectedError } from '../errors.ts';
import { rateLimitAddress } from '../rate-limit/address.ts';
import type { TierRateLimiter } from '../rate-limit/limiter.ts';
import { sendError } from './envelope.ts';
import { hasUnsafeText, UNSAFE_TEXT_MESSAGE } from '../services/schemas/common.ts';

/**
 * Sign-in attempts allowed per account (the lower-cased email) per window, counted across
 * instances (Redis when configured): every attempt counts, right or wrong, before the password
 * is checked, so parallel guesses from many addresses cannot exceed it.
 */
export const SIGNIN_ACCOUNT_LIMIT = { points: 10, durationSec: 15 * 60 };

/** Sign-in and sign-up attempts allowed per client address per window, across instances. */
export const SIGNIN_IP_LIMIT = { points: 30, durationSec: 15 * 60 };

/** The endpoints the per-address budget covers; sign-in is also counted per account. */
const SIGN_IN_PATH = `${AUTH_BASE_PATH}/sign-in/email`;
const THROTTLED_PATHS = new Set([SIGN_IN_PATH, `${AUTH_BASE_PATH}/sign-up/email`]);

/** Largest request body accepted on /auth/* (sign-up, sign-in): 64 KiB. */
const AUTH_BODY_LIMIT = 64 * 1024;

/** Request headers not forwarded to better-auth (hop-by-hop, or recomputed from the body; the client-IP header is set here). */
const DROPPED_REQUEST_HEADERS = ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', CLIENT_IP_HEADER];

/** Response headers not copied back (Fastify computes them). */
const DROPPED_RESPONSE_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'set-cookie']);

/** The better-auth endpoints that take a display `name`: sign-up and update-user. */
const NAMED_PATHS = new Set([`${AUTH_BASE_PATH}/sign-up/email`, `${AUTH_BASE_PATH}/update-user`]);

/**
 * The better-auth endpoints that set a password, with the body field that holds it: a new
 * password with a control character is refused there (PASSWORD_CONTROL). Sign-in and
 * change-password's `currentPassword` are not checked: an account whose password was set
 * before this rule must still get in (there is no password reset).
 */
const PASSWORD_FIELDS: ReadonlyMap<string, readonly string[]> = new Map([
  [`${AUTH_BASE_PATH}/sign-up/email`, ['password']],
  [`${AUTH_BASE_PATH}/change-password`, ['newPassword']],
]);

/**
 * C0 control characters and DEL, refused in new passwords: none can be typed in a password
 * field, and a trailing NUL is invisible to the hash (the password is scrypt's HMAC key, and a
 * key shorter than the hash block is padded with zero bytes, RFC 2104), so `secret\u0000` is
 * the same password as `secret`.
 */
// eslint-disable-next-line no-control-regex -- control characters are what this finds
const PASSWORD_CONTROL = /[\u0000-\u001f\u007f]/;

/** Longest display `name` accepted at sign-up or update-user, characters (code points; better-auth sets no limit). */
export const SIGN_UP_NAME_MAX = 100;

/**
 * better-auth endpoints this service does not offer (their features need email delivery or are
 * not enabled), answered 404 with why before better-auth sees them: better-auth answered them
 * with a message of its own and logged an error for each anonymous call.
 */
const NOT_OFFERED: ReadonlyMap<string, string> = new Map([
  ...['request-password-reset', 'forget-password', 'reset-password'].map(
    (p) =>
      [
        `${AUTH_BASE_PATH}/${p}`,
        'Password reset is not offered: this service sends no email. Sign in with your password; a lost one cannot be recovered here, so sign up again with another email (README, "Accounts, API keys and theses")',
      ] as const,
  ),
  [`${AUTH_BASE_PATH}/change-email`, 'Changing the email of an account is not offered: sign up again with the new email'],
  [
    `${AUTH_BASE_PATH}/delete-user`,
    'Deleting an account is not offered here: revoke its API keys (POST /api/v1/keys/revoke) and delete its theses',
  ],
]);

/** The path of the session-to-JWT exchange (`GET /auth/token` with the session token as bearer). */
const TOKEN_PATH = `${AUTH_BASE_PATH}/token`;

/**
 * A string field of a JSON request body (sign-in's `email`, sign-up's and update-user's
 * `name`, a password), or null when the body is empty, not JSON, or the field is absent or not a string
 * (better-auth answers those itself).
 */
function bodyString(body: Buffer | undefined, field: string): string | null {
  if (!body || body.length === 0) return null;
  let parsed = PARSED.get(body);
  if (parsed === undefined) {
    try {
      // A leading byte-order mark is dropped, as better-auth's `request.json()` drops it: a body
      // these checks cannot read must not reach better-auth as one it can.
      const v: unknown = JSON.parse(body.toString('utf8').replace(/^\uFEFF/, ''));
      parsed = v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : null;
    } catch {
      parsed = null;
    }
    PARSED.set(body, parsed);
  }
  const v = parsed?.[field];
  return typeof v === 'string' ? v : null;
}

/** Each /auth body parsed once per request, however many fields the checks read (bodyString). */
const PARSED = new WeakMap<Buffer, Record<string, unknown> | null>();

/**
 * Counts one sign-in / sign-up attempt against the per-address and (sign-in) per-account
 * budgets. When one is used up, answers 429 RATE_LIMITED with Retry-After (header and
 * `error.details.retry_after`) and returns true. The account is keyed by the SHA-256 of
 * the lower-cased email, so neither Redis nor the log holds the email.
 */
async function throttled(limiter: TierRateLimiter, req: FastifyRequest, reply: FastifyReply, path: string): Promise<boolean> {
  const byIp = limiter.budget('auth-ip', SIGNIN_IP_LIMIT.points, SIGNIN_IP_LIMIT.durationSec);
  const ip = await byIp.consume(rateLimitAddress(req.ip));
  let refused = ip.allowed ? null : { retryAfterSec: ip.retryAfterSec, scope: 'address' };
  if (!refused && path === SIGN_IN_PATH) {
    const email =
      bodyString(req.body as Buffer | undefined, 'email')
        ?.trim()
        .toLowerCase() ?? '';
    if (email) {
      const byAccount = limiter.budget('auth-account', SIGNIN_ACCOUNT_LIMIT.points, SIGNIN_ACCOUNT_LIMIT.durationSec);
      const acc = await byAccount.consume(createHash('sha256').update(email).digest('hex'));
      if (!acc.allowed) refused = { retryAfterSec: acc.retryAfterSec, scope: 'account' };
    }
  }
  if (!refused) return false;
  req.log.warn({ scope: refused.scope }, 'identity provider: sign-in attempts throttled');
  sendError(
    req,
    reply,
    429,
    'RATE_LIMITED',
    `Too many sign-in attempts for this ${refused.scope === 'account' ? 'account' : 'address'}; try again in ${refused.retryAfterSec} seconds`,
    { retry_after: refused.retryAfterSec, scope: refused.scope },
    null,
  );
  return true;
}

/**
 * Mounts the embedded identity provider (src/auth/identity.ts) on the app: `/auth/*` (GET and
 * POST, handed to better-auth as a web Request built on the configured origin, with the
 * client address in CLIENT_IP_HEADER) and `/.well-known/openid-configuration`. The sign-in
 * and sign-up forms are the dashboard's (`/signin`, `/account`: src/web/).
 *
 * With a `limiter`, sign-in and sign-up are throttled before better-auth sees them
 * (SIGNIN_IP_LIMIT per client address, SIGNIN_ACCOUNT_LIMIT per account on sign-in), shared
 * by all instances when the limiter uses Redis: 429 RATE_LIMITED in the error envelope with
 * Retry-After. Errors of the identity provider (its database down: 503 SERVICE_UNAVAILABLE;
 * anything unexpected: 500 INTERNAL_ERROR) are answered in the error envelope too.
 */
export async function identityRoutes(app: FastifyInstance, idp: EmbeddedIdentity, limiter?: TierRateLimiter): Promise<void> {
  await app.register(async (scope) => {
    // better-auth parses the body itself: hand it the raw bytes, whatever the content type.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: AUTH_BODY_LIMIT }, (_req, body, done) => done(null, body));
    // better-auth's own HTML (its /auth/error page, with an inline style) gets the framing and
    // sniffing protection of the dashboard's pages and a CSP that allows nothing but that style.
    scope.addHook('onSend', (_req, reply, payload, done) => {
      if (String(reply.getHeader('content-type') ?? '').startsWith('text/html'))
        pageHeaders(reply, "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
      done(null, payload);
    });

    scope.route({
      method: ['GET', 'POST'],
      url: `${AUTH_BASE_PATH}/*`,
      schema: { hide: true },
      // The parser's limit, also on the route, so that the "too large" message quotes it.
      bodyLimit: AUTH_BODY_LIMIT,
      handler: async (req, reply) => {
        /** Answers in the error envelope, never cached (the meta has no as-of: not market data). */
        const refuse = (status: number, code: ErrorCode, message: string, details?: Record<string, unknown>) => {
          reply.header('cache-control', 'no-store');
          return sendError(req, reply, status, code, message, details, null);
        };
        const raw = req.url.split('?')[0]!;
        const noEndpoint = () =>
          refuse(
            404,
            'NOT_FOUND',
            `No identity endpoint ${req.method} ${raw}: sign up with POST ${AUTH_BASE_PATH}/sign-up/email, sign in with POST ${SIGN_IN_PATH}, get a JWT with GET ${TOKEN_PATH} (README, "Accounts, API keys and theses")`,
          );
        // better-auth reads the path from a WHATWG URL, which resolves dot segments (`x/../`,
        // `./`) and drops a fragment (`#x`): such a path would skip the checks below, which are
        // keyed by path, while better-auth served the endpoint. No identity endpoint is reached
        // through one, nor through percent-encoding (which only disguises a path here).
        if (new URL(req.url, idp.origin).pathname !== raw || raw.includes('%')) return noEndpoint();
        // The path as better-auth's router will match it (a trailing slash or another case must not skip the checks).
        const path = raw.replace(/\/+$/, '').toLowerCase();
        if (req.method === 'POST' && THROTTLED_PATHS.has(path)) {
          // JSON only: the per-account throttle reads the email from the body, and a form-encoded
          // body (which better-auth would also accept) must not slip past it.
          const type = String(req.headers['content-type'] ?? '')
            .split(';')[0]!
            .trim()
            .toLowerCase();
          if (type !== 'application/json')
            return refuse(400, 'INVALID_PARAMETER', 'Send sign-in and sign-up bodies as JSON (Content-Type: application/json)', {
              field: 'content-type',
            });
          if (limiter && (await throttled(limiter, req, reply, path))) return reply;
        }
        const notOffered = NOT_OFFERED.get(path);
        if (notOffered !== undefined) return refuse(404, 'NOT_FOUND', notOffered);
        // The display name, wherever better-auth takes one (sign-up, update-user).
        const name = req.method === 'POST' && NAMED_PATHS.has(path) ? bodyString(req.body as Buffer | undefined, 'name') : null;
        const nameLength = name === null ? 0 : [...name].length;
        if (nameLength > SIGN_UP_NAME_MAX)
          return refuse(400, 'INVALID_PARAMETER', `Invalid body field 'name': at most ${SIGN_UP_NAME_MAX} characters (got ${nameLength})`, {
            field: 'name',
          });
        // Refused before better-auth looks anything up: the same answer for every email (a NUL
        // in a new user's name failed only for unregistered emails, and update-user with a 500).
        if (name !== null && (hasUnsafeText(name) || name.trim() === ''))
          return refuse(
            400,
            'INVALID_PARAMETER',
            `Invalid body field 'name': ${name.trim() === '' ? 'must not be blank' : UNSAFE_TEXT_MESSAGE}; send a display name`,
            { field: 'name' },
          );
        // Before better-auth looks anything up (the same answer for every email).
        for (const field of req.method === 'POST' ? (PASSWORD_FIELDS.get(path) ?? []) : []) {
          if (PASSWORD_CONTROL.test(bodyString(req.body as Buffer | undefined, field) ?? ''))
            return refuse(
              400,
              'INVALID_PARAMETER',
              `Invalid body field '${field}': a password must not contain control characters (U+0000-U+001F, U+007F); send it as typed`,
              { field },
            );
        }
        const headers = fromNodeHeaders(req.headers);
        for (const h of DROPPED_REQUEST_HEADERS) headers.delete(h);
        // The full address: better-auth needs a valid IP (it counts IPv6 by its /64 itself, `ipv6Subnet`'s default).
        headers.set(CLIENT_IP_HEADER, req.ip);
        const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : (req.body as Buffer | undefined);
        // The URL is built on the configured origin, never on the client's Host header.
        const request = new Request(new URL(req.url, idp.origin), {
          method: req.method,
          headers,
          body: body && body.length > 0 ? new Uint8Array(body) : undefined,
        });
        let res: Response;
        try {
          res = await idp.handler(request);
        } catch (err) {
          const e = unexpectedError(err);
          return refuse(e.status, e.code, e.message, e.details);
        }
        // better-auth's bare answers, in the envelope with what to do next: an unknown path (404
        // with no body) and the token exchange without a valid session (401 {"message":"Unauthorized"}).
        if (res.status === 404 && !res.body) return noEndpoint();
        if (res.status === 401 && path === TOKEN_PATH) {
          reply.header('www-authenticate', 'Bearer');
          return refuse(
            401,
            'UNAUTHORIZED',
            `No valid session: sign in with POST ${SIGN_IN_PATH} and send the session token it returns as Authorization: Bearer <session token>`,
          );
        }
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

    scope.get('/.well-known/openid-configuration', { schema: { hide: true } }, async (_req, reply) =>
      reply.header('cache-control', 'public, max-age=300').type('application/json; charset=utf-8').send(idp.discovery),
    );
  });
}
