import { displayPrefix, looksLikeApiKey } from '../auth/api-keys.ts';
import { IdentityProviderUnavailableError, type JwtCheck, SessionEndedError } from '../auth/jwt-check.ts';
import { TIER_LIMITS, type Tier } from '../auth/tiers.ts';
import { DEPENDENCY_RETRY_AFTER_SEC, retryAfterOf, ServiceError, unavailable, unexpectedError } from '../errors.ts';
import { type Admission, type Budget, type LimitDecision, rateLimitHeaders, type TierRateLimiter } from '../rate-limit/limiter.ts';
import { type CachedKey, type KeyCaller, type KeyService, MAX_ACTIVE_KEYS, type UserIdentity } from './keys.ts';
import type { UsageTracker } from './usage.ts';

/**
 * Who may call an operation, declared once per operation (services/operations/*) and enforced
 * here for REST, MCP and every other surface alike (docs/architecture.md, "Access").
 *
 * - `public`: an API key is optional; without one the caller is the unauthenticated tier,
 *   counted per client address. A JWT is not accepted.
 * - `api-key`: an API key is required (`Authorization: Bearer svc_live_...`), optionally of
 *   one of `tiers`.
 * - `api-key-or-user`: an API key or the JWT of a signed-in user (theses); a JWT caller counts
 *   against the user's tier quota.
 * - `user`: the JWT of a signed-in user only (key management), on a per-user budget of
 *   USER_REQUESTS_PER_MINUTE instead of the API quota.
 *
 * `quota: 'none'` is for requests that are not operations (the OpenAPI document, the MCP
 * transport, whose tool calls are metered one by one): the caller is identified, nothing is
 * counted. `quota: 'dashboard'` is the web dashboard's reading of an operation
 * (`dashboardPolicy`): not API usage, counted per client address against
 * DASHBOARD_REQUESTS_PER_MINUTE.
 */
export interface Policy {
  readonly name: 'public' | 'api-key' | 'api-key-or-user' | 'user';
  /** Tiers allowed (default: all). */
  readonly tiers?: readonly Tier[];
  /** What a served request counts against. */
  readonly quota: 'tier' | 'user' | 'none' | 'dashboard';
}

/**
 * The `Authorization` header read on a path with no route (a 404 counted like PUBLIC): an API
 * key is kept (a bad key is still refused, and its tier's headers are the caller's), anything
 * else, such as a signed-in user's JWT sent to a mistyped path, is dropped so that the caller
 * gets the 404 it needs instead of a 401 that counts against its address's failed-auth budget.
 */
export function unknownRouteCredential(header: string | undefined): string | undefined {
  const token = header ? BEARER.exec(header)?.[1] : undefined;
  return token && looksLikeApiKey(token) ? header : undefined;
}

/** Anyone; an API key raises the tier. */
export const PUBLIC: Policy = { name: 'public', quota: 'tier' };
/** Anyone, counting nothing (the OpenAPI document; the MCP transport before a tool runs). */
export const PUBLIC_UNMETERED: Policy = { name: 'public', quota: 'none' };
/** An API key, of one of `tiers` when given. */
export function apiKey(tiers?: readonly Tier[]): Policy {
  return tiers ? { name: 'api-key', tiers, quota: 'tier' } : { name: 'api-key', quota: 'tier' };
}
/** An API key or the JWT of a signed-in user. */
export const API_KEY_OR_USER: Policy = { name: 'api-key-or-user', quota: 'tier' };
/** The JWT of a signed-in user (key management). */
export const USER: Policy = { name: 'user', quota: 'user' };

/**
 * The policy under which the web dashboard reads an operation (its `/app/data/...` routes,
 * src/web/): the operation's own credential and tier rules, except that where the API wants
 * an API key the dashboard sends the signed-in user's JWT instead (the browser holds no key),
 * and that the request counts against the dashboard's per-address budget
 * (DASHBOARD_REQUESTS_PER_MINUTE) instead of the API quota: browsing is not API usage, and
 * the budget stops scraping. A tier-gated operation (the signal history: pro, api) stays
 * tier-gated: a free user gets the same 403 TIER_REQUIRED as through the API.
 */
export function dashboardPolicy(p: Policy): Policy {
  const name = p.name === 'api-key' ? 'api-key-or-user' : p.name;
  return p.tiers ? { name, tiers: p.tiers, quota: 'dashboard' } : { name, quota: 'dashboard' };
}

/** Who is calling. `subject` is what quotas are counted per. */
export type Caller =
  | { kind: 'anonymous'; tier: 'unauthenticated'; subject: string }
  | { kind: 'key'; tier: Tier; subject: string; keyId: string; userId: string }
  | { kind: 'jwt'; tier: Tier; subject: string; userId: string; email: string | null };

/** The caller of the unauthenticated tier, counted per `subject` (e.g. `ip:<address>`, `stdio`). */
export function anonymousCaller(subject: string): Caller {
  return { kind: 'anonymous', tier: 'unauthenticated', subject };
}

/** The caller a valid API key stands for. */
export function keyCaller(k: KeyCaller): Caller {
  return { kind: 'key', tier: k.tier, subject: `key:${k.keyId}`, keyId: k.keyId, userId: k.userId };
}

/**
 * The signed-in user behind a caller admitted by the `user` or `api-key-or-user` policy (the
 * owner of keys and theses).
 * @throws ServiceError UNAUTHORIZED for an anonymous caller (a policy that let one through).
 */
export function signedInUser(c: Caller): UserIdentity {
  if (c.kind === 'jwt') return { userId: c.userId, email: c.email };
  if (c.kind === 'key') return { userId: c.userId, email: null };
  throw new ServiceError('UNAUTHORIZED', MESSAGES.keyRequired, { reason: 'missing' });
}

/** Failed authentications allowed per client address per minute before 429. */
export const AUTH_FAILURES_PER_MINUTE = 20;
/**
 * Dashboard data requests (`dashboardPolicy`) allowed per client address per minute: generous
 * for a person browsing (a page makes two to five), low enough to slow a scraper down. There
 * is no daily window: over a day an address may read more public answers through the
 * dashboard than the unauthenticated API tier allows (10 per day).
 */
export const DASHBOARD_REQUESTS_PER_MINUTE = 120;
/** Key-management requests allowed per user per minute (policy `user`). */
export const USER_REQUESTS_PER_MINUTE = 30;
/**
 * The name of the account-ceiling limiter (`TierRateLimiter.scaled(ACCOUNT_LIMITER,
 * MAX_ACTIVE_KEYS)`): per user id, in both windows, MAX_ACTIVE_KEYS × the tier's per-key
 * limits, counted over all the user's key and JWT requests, revoked keys included.
 */
export const ACCOUNT_LIMITER = 'acct';

/**
 * How to get an API key and send it, appended to the refusals that need one; the same text
 * serves REST, MCP over HTTP and MCP over stdio (where the key is an environment variable).
 */
const GET_A_KEY =
  'sign in at /signin, create a key there (or POST /api/v1/keys/create with your JWT), and send it as Authorization: Bearer svc_live_... (MCP over stdio: set MARKET_INTEL_API_KEY)';

/**
 * How to get a JWT from the embedded identity provider (README, "API keys"): the /signin page
 * keeps it in the browser (the dashboard's API keys section at /account uses it); scripts take
 * it from GET /auth/token. With an external provider (AUTH_ISSUER) its checker's `howToGet`
 * says instead (auth/jwt.ts).
 */
const GET_A_JWT =
  'in a browser, sign in at /signin and manage keys at /account; with curl, POST /auth/sign-in/email, then GET /auth/token with the session token as Authorization: Bearer';

/** A wait in words (seconds, minutes, or hours and minutes), for a 429 message. */
function waitFor(retryAfterSec: number): string {
  if (retryAfterSec < 120) return `${retryAfterSec} s`;
  const min = Math.ceil(retryAfterSec / 60);
  if (min < 120) return `${min} min`;
  return `${Math.floor(min / 60)} h ${min % 60} min`;
}

/**
 * Every message of an access refusal, written once for REST and MCP. Each says what went
 * wrong and what to do next. A presented key is named only by its display prefix
 * (`svc_live_` + 4 characters, as in key lists), never in full.
 */
export const MESSAGES = {
  keyRequired: `This operation needs an API key: ${GET_A_KEY}`,
  /**
   * No credential where an API key or a signed-in user's JWT is accepted (policy
   * `api-key-or-user` over HTTP with an identity provider: theses, the dashboard's data).
   */
  /** The `howTo*` argument of these messages: how to get a JWT here (`Access`: its checker's `howToGet`, else GET_A_JWT). */
  keyOrJwtRequired: (howToJwt: string) =>
    `This operation needs an API key or a signed-in user's JWT (bearer token), sent as Authorization: Bearer <key or JWT>. For a key: ${GET_A_KEY}. For a JWT: ${howToJwt}`,
  jwtRequired: (howToJwt: string) => `Key management needs the JWT of a signed-in user as Authorization: Bearer <JWT>: ${howToJwt}`,
  keyNotJwt: (howToJwt: string) =>
    `Key management takes the JWT of a signed-in user, not an API key, as Authorization: Bearer <JWT>: ${howToJwt}`,
  /** An Authorization header that is not `Bearer <token>` (reason `malformed_header`). */
  badHeader: 'Authorization header must be: Bearer <token> (an API key svc_live_..., or a JWT for key management and theses)',
  /** An API key that is not one of ours (reason `unknown`). */
  invalidKey: (prefix: string) => `Invalid API key ${prefix}...: no such key (check that it was copied whole); to get one, ${GET_A_KEY}`,
  malformedKey: (prefix: string) =>
    `Invalid API key ${prefix}...: malformed (a key is svc_live_ followed by 38 letters and digits); copy it again from where you created it, or create one at /signin`,
  badChecksum: (prefix: string) =>
    `Invalid API key ${prefix}...: checksum mismatch (mistyped or truncated); copy it again from where you created it, or create one at /signin`,
  revokedKey: (prefix: string) =>
    `Invalid API key ${prefix}...: it has been revoked; create a new key at /signin (or POST /api/v1/keys/create)`,
  /**
   * Over stdio (reason `wrong_credential`, or `malformed_header` for a value with spaces): the value
   * of the environment variable `variable` is not an API key; no JWT or header applies there.
   * The value is not echoed (it may be some other secret).
   */
  notAKeyInEnv: (variable: string) =>
    `${variable}: the value is not an API key of this service (a key is svc_live_ followed by 38 letters and digits, set alone: no "Bearer ", quotes or spaces). To get one, sign in to the running service at /signin (the dashboard's account page), create a key in its API keys section, and set ${variable} to that key; or unset ${variable} for the unauthenticated tier`,
  /** A bearer token over HTTP that is neither an API key nor accepted as a JWT here. */
  notAKey:
    'Invalid API key: API endpoints and MCP take an API key (Authorization: Bearer svc_live_...), not a JWT or other token; JWTs are for key management (/api/v1/keys/...) and theses. Create a key at /signin',
  invalidJwt: (howToJwt: string) => `Invalid or expired token: get a fresh JWT; ${howToJwt}`,
  idpDown: 'The identity provider could not be reached; try again shortly',
  sessionEnded: `The sign-in session this JWT was issued for has ended (signed out, revoked or expired): sign in again; ${GET_A_JWT}`,
  tooManyFailures: (retryAfterSec: number) =>
    `Too many failed authentication attempts from this address: try again in ${waitFor(retryAfterSec)}, with a valid key`,
  tierRequired: (tiers: readonly Tier[], tier: Tier) =>
    `This operation needs the ${tiers.join(' or ')} tier; your tier is ${tier}${tier === 'unauthenticated' ? `: ${GET_A_KEY}` : ': the operator sets your plan (all your keys then get its tier)'}`,
  rateLimited: (limit: number, window: string, tier: Tier, retryAfterSec: number) =>
    `Rate limit exceeded: ${limit} requests per ${window} for the ${tier} tier; retry in ${waitFor(retryAfterSec)}` +
    (tier === 'unauthenticated'
      ? `, or for higher limits ${GET_A_KEY}`
      : tier === 'api'
        ? ''
        : ' (higher tiers have higher limits: the operator sets your plan, README "Tiers and rate limits")'),
  accountRateLimited: (limit: number, window: string, tier: Tier, retryAfterSec: number) =>
    `Account rate limit exceeded: all API keys of your account together (revoked ones included) and your signed-in requests may make at most ${limit} requests per ${window === 'day' ? 'UTC day' : window} on the ${tier} tier (${MAX_ACTIVE_KEYS} × the per-key limit); creating new keys does not reset it. Retry in ${waitFor(retryAfterSec)}, or ask for a higher plan`,
  userRateLimited: (retryAfterSec: number) =>
    `Too many key-management requests for this user: at most ${USER_REQUESTS_PER_MINUTE} per minute; retry in ${waitFor(retryAfterSec)}`,
  dashboardRateLimited: (retryAfterSec: number) =>
    `Too many dashboard requests from this address: at most ${DASHBOARD_REQUESTS_PER_MINUTE} per minute; retry in ${waitFor(retryAfterSec)}, or for automated access use the API with a key`,
} as const;

/**
 * Query parameters that would carry a credential (lower-cased). REST and MCP refuse a request
 * that has one (400), whatever its value, instead of ignoring it and serving the request as
 * unauthenticated: a key in a URL ends up in proxy and browser logs, and a silently ignored key
 * spends the address's unauthenticated quota.
 */
export const QUERY_CREDENTIAL_PARAMS: ReadonlySet<string> = new Set(['access_token', 'token', 'api_key', 'apikey', 'key', 'authorization']);

/** The message of that refusal: what to do instead. */
export const QUERY_CREDENTIAL_MESSAGE =
  'Credentials in the query string are not accepted (remove the parameter: a key in a URL ends up in logs); send the API key as Authorization: Bearer <key>';

/**
 * The name of the first query parameter of `query` (a parsed query string) that would carry
 * a credential (QUERY_CREDENTIAL_PARAMS, case-insensitive), or null.
 */
export function queryCredential(query: unknown): string | null {
  if (!query || typeof query !== 'object') return null;
  for (const k in query) if (QUERY_CREDENTIAL_PARAMS.has(k.toLowerCase())) return k;
  return null;
}

/**
 * Request headers (lower-case, as Node.js gives them) that other APIs read an API key from.
 * This service reads `Authorization: Bearer` only (README, "Authentication"); a request that
 * sends one of these and no Authorization is refused (400) rather than served as unauthenticated,
 * which would spend the address's small unauthenticated quota with the key ignored.
 */
export const HEADER_CREDENTIAL_NAMES: readonly string[] = ['x-api-key', 'api-key', 'apikey', 'x-auth-token'];

/** The message of that refusal for header `name`: what to do instead. */
export function headerCredentialMessage(name: string): string {
  return `The ${name} header is not read: send the API key as Authorization: Bearer <key>`;
}

/**
 * A credential where this service does not read one, as the 400 INVALID_PARAMETER that REST
 * and MCP answer (`details`: `location` querystring or headers, `field`): a query parameter of
 * QUERY_CREDENTIAL_PARAMS (always), or a header of HEADER_CREDENTIAL_NAMES on a request without
 * `Authorization`. Null when there is none. `query`: the parsed query string; `headers`: the
 * request's headers.
 */
export function misplacedCredential(query: unknown, headers: Readonly<Record<string, unknown>>): ServiceError | null {
  const param = queryCredential(query);
  if (param !== null) return new ServiceError('INVALID_PARAMETER', QUERY_CREDENTIAL_MESSAGE, { location: 'querystring', field: param });
  if (headers.authorization !== undefined) return null;
  for (const name of HEADER_CREDENTIAL_NAMES)
    if (headers[name] !== undefined)
      return new ServiceError('INVALID_PARAMETER', headerCredentialMessage(name), { location: 'headers', field: name });
  return null;
}

/**
 * The refusal of a presented API key (KeyService's UNAUTHORIZED), reworded with MESSAGES for
 * its `details.reason` (malformed, bad_checksum, unknown, revoked); the reason is kept.
 */
function keyRefusal(e: ServiceError, token: string): ServiceError {
  const reason = e.details?.reason;
  const prefix = displayPrefix(token);
  const message =
    reason === 'malformed'
      ? MESSAGES.malformedKey(prefix)
      : reason === 'bad_checksum'
        ? MESSAGES.badChecksum(prefix)
        : reason === 'revoked'
          ? MESSAGES.revokedKey(prefix)
          : MESSAGES.invalidKey(prefix);
  return new ServiceError('UNAUTHORIZED', message, e.details);
}

/** The outcome of `authenticate`: the caller, or the refusal with the limits to report. */
export type Authentication =
  | { ok: true; caller: Caller }
  | {
      ok: false;
      /** UNAUTHORIZED (details.reason), RATE_LIMITED (failed-auth budget), or 503/500 when a dependency failed. */
      error: ServiceError;
      /** The client address's unauthenticated-tier state, for the rate-limit headers. */
      limits: LimitDecision;
      /** The unexpected error behind a 5xx, for the log. */
      cause?: unknown;
    };

/** The outcome of `meter`: the limits to report and, when refused, the 429. */
export interface Metering {
  limits: LimitDecision;
  error: ServiceError | null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * A key caller admitted from the key cache whose last checks were left to `meter`'s single
 * round trip: the client address's failed-auth budget, the key's revocation marker and the
 * tier epoch its tier was read under. Module-private (never serialized, never logged).
 */
interface Deferred {
  header: string;
  policy: Policy;
  address: string;
  token: string;
  epoch: string;
}

/**
 * Whose count ran out, in a 429's `details.scope`: the API key's, the signed-in user's (JWT),
 * the client address's (no key, or its budget of failed authentications), the account
 * ceiling (all of a user's keys and JWT requests together), or MCP's cap on messages other
 * than tools/call (per key or address; src/mcp/http.ts).
 */
export type QuotaScope = 'key' | 'jwt' | 'address' | 'account' | 'mcp-control';

/**
 * 429 RATE_LIMITED with `details: {window, limit, reset, retry_after, scope?}` (`reset` ISO
 * 8601, `retry_after` seconds): the one shape of every quota refusal, REST and MCP.
 */
export function rateLimited(
  message: string,
  window: 'minute' | 'day',
  limit: number,
  reset: Date,
  retryAfterSec: number,
  scope?: QuotaScope,
): ServiceError {
  const details = { window, limit, reset: reset.toISOString(), retry_after: retryAfterSec };
  return new ServiceError('RATE_LIMITED', message, scope ? { ...details, scope } : details);
}

/** What the access checks need. */
export interface AccessDeps {
  keys: KeyService;
  limiter: TierRateLimiter;
  usage: UsageTracker;
  /** The plan of a signed-in user (JWT callers), or null when the user is not known yet. */
  userTier(userId: string): Promise<Tier | null>;
  /** The verifier of signed-in users' JWTs; null when no identity provider is configured. */
  jwt?: JwtCheck | null;
}

/**
 * The one access module: `authenticate` (who is calling), `authorize` (may they call this
 * operation), `meter` (count the call against their quota). REST's guard and the MCP tool
 * runner are thin callers of these three; refused requests consume no quota; failed
 * authentications count against a per-address budget, and an address over it is refused
 * before any key or JWT is looked up.
 */
export class Access {
  readonly #deps: AccessDeps;
  #jwt: JwtCheck | null;
  readonly #authFailures: Budget;
  /** Cache-hit callers whose checks `meter` still owes (see Deferred). */
  readonly #deferred = new WeakMap<Caller, Deferred>();
  readonly #perUser;
  readonly #dashboard;
  readonly #account: TierRateLimiter;

  constructor(deps: AccessDeps) {
    this.#deps = deps;
    this.#jwt = deps.jwt ?? null;
    this.#authFailures = deps.limiter.budget('auth-fail', AUTH_FAILURES_PER_MINUTE, 60);
    this.#perUser = deps.limiter.budget('user', USER_REQUESTS_PER_MINUTE, 60);
    this.#dashboard = deps.limiter.budget('dashboard', DASHBOARD_REQUESTS_PER_MINUTE, 60);
    this.#account = deps.limiter.scaled(ACCOUNT_LIMITER, MAX_ACTIVE_KEYS);
  }

  /** How a client gets a JWT accepted here, for refusals: the checker's own words (an external provider's), else the embedded provider's way. */
  #howToJwt(): string {
    return this.#jwt?.howToGet ?? GET_A_JWT;
  }

  /** Sets the JWT verifier once the identity provider is built (it needs the open database). */
  useJwtVerifier(jwt: JwtCheck | null): void {
    this.#jwt = jwt;
  }

  async #identify(header: string | undefined, policy: Policy, address: string, epoch: string): Promise<Caller> {
    if (header === undefined || header === '') {
      if (policy.name === 'api-key' || policy.name === 'api-key-or-user') throw this.#missingCredential(policy, true);
      if (policy.name === 'user') throw new ServiceError('UNAUTHORIZED', MESSAGES.jwtRequired(this.#howToJwt()), { reason: 'missing' });
      return anonymousCaller(`ip:${address}`);
    }
    const m = BEARER.exec(header);
    // Its own reason: `malformed` is a malformed key's (keyRefusal), and stdio words the two apart.
    if (!m) throw new ServiceError('UNAUTHORIZED', MESSAGES.badHeader, { reason: 'malformed_header' });
    const token = m[1]!;
    if (looksLikeApiKey(token)) {
      if (policy.name === 'user')
        throw new ServiceError('UNAUTHORIZED', MESSAGES.keyNotJwt(this.#howToJwt()), { reason: 'wrong_credential' });
      try {
        return keyCaller(await this.#deps.keys.authenticate(token, epoch));
      } catch (e) {
        throw e instanceof ServiceError && e.code === 'UNAUTHORIZED' ? keyRefusal(e, token) : e;
      }
    }
    if (policy.name === 'public' || policy.name === 'api-key' || !this.#jwt) {
      throw new ServiceError('UNAUTHORIZED', MESSAGES.notAKey, { reason: 'wrong_credential' });
    }
    let claims: { sub: string; email: string | null };
    try {
      claims = await this.#jwt.verify(token);
    } catch (e) {
      // Not the caller's fault: 503, and no failed-authentication count against its address.
      if (e instanceof IdentityProviderUnavailableError) throw unavailable(MESSAGES.idpDown, DEPENDENCY_RETRY_AFTER_SEC, e.cause ?? e);
      if (e instanceof SessionEndedError) throw new ServiceError('UNAUTHORIZED', MESSAGES.sessionEnded, { reason: 'session_ended' });
      throw new ServiceError('UNAUTHORIZED', MESSAGES.invalidJwt(this.#howToJwt()), { reason: 'invalid_jwt' });
    }
    const tier = (await this.#deps.userTier(claims.sub)) ?? 'free';
    return { kind: 'jwt', tier, subject: `user:${claims.sub}`, userId: claims.sub, email: claims.email };
  }

  /**
   * Identifies the caller from an `Authorization` header value under `policy`'s credential
   * rules. `address` is the client's IP (the per-address failed-authentication budget and the
   * unauthenticated tier are counted per address).
   *
   * Synchronous (no promise) for the two usual requests: a key found in the key cache under a
   * tier-quota policy (its remaining checks ride on `meter`'s single round trip), and no
   * credentials under the `public` policy. Everything else returns a promise.
   */
  authenticate(header: string | undefined, policy: Policy, address: string): Authentication | Promise<Authentication> {
    if (!header) {
      if (policy.name === 'public') return { ok: true, caller: anonymousCaller(`ip:${address}`) };
      return this.#authenticate(header, policy, address, undefined);
    }
    const token = BEARER.exec(header)?.[1];
    const hit = token && policy.name !== 'user' && looksLikeApiKey(token) ? this.#deps.keys.cached(token) : undefined;
    if (hit && policy.quota === 'tier') {
      const caller = keyCaller(hit.caller);
      // The usual request: its checks ride on meter's one round trip.
      if (this.authorize(caller, policy) === null) {
        this.#deferred.set(caller, { header, policy, address, token: token!, epoch: hit.epoch });
        return { ok: true, caller };
      }
    }
    return this.#authenticate(header, policy, address, hit ? { token: token!, hit } : undefined);
  }

  async #authenticate(
    header: string | undefined,
    policy: Policy,
    address: string,
    cached: { token: string; hit: CachedKey } | undefined,
  ): Promise<Authentication> {
    const peekAddress = () => this.#deps.limiter.peek(`ip:${address}`, 'unauthenticated');
    let epoch = '0';
    if (header) {
      if (cached) {
        const { token, hit } = cached;
        const caller = keyCaller(hit.caller);
        // Refused by authorize, or not metered against the tier quota: check now.
        const v = await this.#deps.limiter.check(
          { budget: this.#authFailures, subject: address },
          { keyId: hit.caller.keyId, epoch: hit.epoch },
        );
        if (v.kind === 'blocked')
          return { ok: false, error: this.#tooManyFailures(v.retryAfterSec, v.resetMs), limits: await peekAddress() };
        if (v.kind === 'ok') return { ok: true, caller };
        this.#deps.keys.evict(hit.caller.keyId);
        if (v.kind === 'revoked') return this.#revoked(token, address);
        // stale: look the key up again, below.
      }
      const gate = await this.#deps.limiter.check({ budget: this.#authFailures, subject: address });
      if (gate.kind === 'blocked')
        return { ok: false, error: this.#tooManyFailures(gate.retryAfterSec, gate.resetMs), limits: await peekAddress() };
      if (gate.kind === 'ok') epoch = gate.epoch;
    }
    try {
      return { ok: true, caller: await this.#identify(header, policy, address, epoch) };
    } catch (e) {
      if (e instanceof ServiceError && e.code === 'UNAUTHORIZED') return this.#failed(e, address);
      // A dependency failed while identifying the caller (503/500): the response still
      // carries the rate-limit headers, of the client address.
      // The cause (a dependency's own error) is for the log; a ServiceError carries it as `cause` when it has one.
      return { ok: false, error: unexpectedError(e), limits: await peekAddress(), cause: e instanceof ServiceError ? e.cause : e };
    }
  }

  /** A failed authentication: counted against the address's budget; 429 once it is used up. */
  async #failed(e: ServiceError, address: string): Promise<Authentication & { ok: false }> {
    const limits = await this.#deps.limiter.peek(`ip:${address}`, 'unauthenticated');
    const budget = await this.#authFailures.consume(address);
    return { ok: false, error: budget.allowed ? e : this.#tooManyFailures(budget.retryAfterSec, budget.resetMs), limits };
  }

  /** A cached key found revoked (its Redis marker): refused as a failed authentication. */
  #revoked(token: string, address: string): Promise<Authentication & { ok: false }> {
    const e = new ServiceError('UNAUTHORIZED', 'This API key has been revoked', { reason: 'revoked' });
    return this.#failed(keyRefusal(e, token), address);
  }

  /** The 429 of the failed-auth budget; `resetMs`: ms until its window ends (details.reset, to the ms). */
  #tooManyFailures(retryAfterSec: number, resetMs: number): ServiceError {
    return rateLimited(
      MESSAGES.tooManyFailures(retryAfterSec),
      'minute',
      AUTH_FAILURES_PER_MINUTE,
      new Date(Date.now() + resetMs),
      retryAfterSec,
      // The client address's own budget of failed authentications ran out (README, "Limits").
      'address',
    );
  }

  /**
   * The 401 (reason `missing`) of a request without a credential under `policy` (`api-key`
   * or `api-key-or-user`). It names the JWT beside the API key only where one would be taken:
   * the policy accepts it, the surface can carry it (`surfaceTakesJwt`: not MCP, whose
   * transport takes API keys only) and an identity provider verifies JWTs here.
   */
  #missingCredential(policy: Policy, surfaceTakesJwt: boolean): ServiceError {
    const jwt = policy.name === 'api-key-or-user' && surfaceTakesJwt && this.#jwt !== null;
    return new ServiceError('UNAUTHORIZED', jwt ? MESSAGES.keyOrJwtRequired(this.#howToJwt()) : MESSAGES.keyRequired, {
      reason: 'missing',
    });
  }

  /**
   * Whether an identified caller may call an operation with `policy`.
   * @param opts.surfaceTakesJwt false where no JWT can be sent (MCP): a missing credential's
   *   401 then asks for an API key only, whatever the policy (default true).
   * @returns null when allowed; UNAUTHORIZED when the policy needs a credential the caller
   *   lacks; TIER_REQUIRED (details: required_tiers, tier) when the caller's tier is not one
   *   of the policy's.
   */
  authorize(caller: Caller, policy: Policy, opts: { surfaceTakesJwt?: boolean } = {}): ServiceError | null {
    if (caller.kind === 'anonymous' && (policy.name === 'api-key' || policy.name === 'api-key-or-user')) {
      return this.#missingCredential(policy, opts.surfaceTakesJwt ?? true);
    }
    if (caller.kind !== 'jwt' && policy.name === 'user')
      return new ServiceError('UNAUTHORIZED', MESSAGES.jwtRequired(this.#howToJwt()), { reason: 'missing' });
    if (policy.tiers && !policy.tiers.includes(caller.tier)) {
      return new ServiceError('TIER_REQUIRED', MESSAGES.tierRequired(policy.tiers, caller.tier), {
        required_tiers: policy.tiers,
        tier: caller.tier,
      });
    }
    return null;
  }

  /**
   * `authorize` for a caller identified once for many calls (MCP over HTTP: the POST is
   * authenticated under the public policy, each tools/call authorized with its operation's).
   * An anonymous caller of an address (subject `ip:<address>`) refused for lacking a credential
   * counts as a failed authentication, as `authenticate` counts it on REST: against the
   * address's budget, and 429 RATE_LIMITED once that is used up.
   * @param opts as `authorize`'s (MCP passes `surfaceTakesJwt: false`).
   * @returns null when allowed, else the refusal (as `authorize`, or the 429).
   */
  async authorizeCounted(caller: Caller, policy: Policy, opts: { surfaceTakesJwt?: boolean } = {}): Promise<ServiceError | null> {
    const denied = this.authorize(caller, policy, opts);
    if (denied?.code !== 'UNAUTHORIZED' || caller.kind !== 'anonymous' || !caller.subject.startsWith('ip:')) return denied;
    return (await this.#failed(denied, caller.subject.slice(3))).error;
  }

  /** The caller's current limits without counting anything (refused requests, unmetered ones). */
  peek(caller: Caller): Promise<LimitDecision> {
    return this.#deps.limiter.peek(caller.subject, caller.tier);
  }

  /** The limits and, when refused, the 429 of a per-minute budget decision (policy `user` or `dashboard`). */
  #budgetMetering(
    b: { allowed: boolean; retryAfterSec: number; remaining: number; resetSec: number; resetMs: number },
    tier: Tier,
    perMinute: number,
    message: (retryAfterSec: number) => string,
    scope?: QuotaScope,
  ): Metering {
    // The window's end to the millisecond: the same on every request of the window (not now +
    // the rounded-up seconds), in X-RateLimit-Reset and a 429's details.reset alike.
    const reset = new Date(Date.now() + b.resetMs);
    const limits: LimitDecision = {
      allowed: b.allowed,
      tier,
      limit: perMinute,
      remaining: b.remaining,
      reset,
      windows: [{ window: 'minute', limit: perMinute, remaining: b.remaining, resetSec: b.resetSec }],
    };
    if (b.allowed) return { limits, error: null };
    limits.exceeded = { window: 'minute', limit: perMinute, reset, retryAfterSec: b.retryAfterSec };
    return { limits, error: rateLimited(message(b.retryAfterSec), 'minute', perMinute, reset, b.retryAfterSec, scope) };
  }

  /**
   * Counts one request of an authorized caller under `policy`: the tier quota (per key, per
   * user for JWT callers, per address for anonymous ones; a served API-key request is added
   * to the key's usage), the per-user budget for `user`, or nothing for `quota: 'none'`.
   * A tier-quota request of a user (key or JWT) also counts against the account ceiling
   * (ACCOUNT_LIMITER), which revoking and re-creating keys cannot reset; its 429 carries
   * `details.scope: 'account'` and the key's own limits (the rate-limit headers stay the
   * key's). A refused request consumes nothing, neither on the key nor on the account.
   * `dashboard` counts against the per-address dashboard budget of `address` (the client's
   * IP; default the caller's subject), never the API quota or a key's usage, except for an
   * API-key caller, whose request counts as API usage (tier quota and key usage).
   */
  meter(caller: Caller, policy: Policy, address?: string): Metering | Promise<Metering> {
    // An API key sent to the dashboard's routes (the browser sends none, only a signed-in
    // user's JWT) is API usage: its tier quota and usage, not the per-address budget, or a key
    // could read the tier-gated history there past its quota.
    if (policy.quota === 'dashboard' && caller.kind === 'key') policy = { ...policy, quota: 'tier' };
    const deferred = this.#deferred.get(caller);
    if (deferred) this.#deferred.delete(caller);
    if (policy.quota !== 'tier') return this.#meterBudget(caller, policy, address, deferred);
    const req = {
      subject: caller.subject,
      tier: caller.tier,
      now: new Date(),
      account: caller.kind === 'anonymous' ? undefined : { limiter: this.#account, subject: `user:${caller.userId}` },
      failedAuth: deferred ? { budget: this.#authFailures, subject: deferred.address } : undefined,
      guard: deferred && caller.kind === 'key' ? { keyId: caller.keyId, epoch: deferred.epoch } : undefined,
    };
    // Synchronous when the memory limiter counts (no Redis): no promise on the usual path.
    const pending = this.#deps.limiter.admit(req);
    return pending instanceof Promise
      ? pending.then((a) => this.#admitted(a, caller, policy, deferred))
      : this.#admitted(pending, caller, policy, deferred);
  }

  /** `meter` for the policies that do not count against the tier quota (none, dashboard, user). */
  async #meterBudget(caller: Caller, policy: Policy, address: string | undefined, deferred: Deferred | undefined): Promise<Metering> {
    if (deferred) {
      // Deferred for a tier-quota operation, metered otherwise: settle the checks first.
      const a = await this.authenticate(deferred.header, PUBLIC_UNMETERED, deferred.address);
      if (!a.ok) return { limits: a.limits, error: a.error };
    }
    if (policy.quota === 'none') return { limits: await this.peek(caller), error: null };
    if (policy.quota === 'dashboard') {
      const b = await this.#dashboard.consume(address ?? caller.subject);
      return this.#budgetMetering(b, caller.tier, DASHBOARD_REQUESTS_PER_MINUTE, MESSAGES.dashboardRateLimited, 'address');
    }
    if (caller.kind === 'jwt') {
      const b = await this.#perUser.consume(caller.userId);
      return this.#budgetMetering(b, caller.tier, USER_REQUESTS_PER_MINUTE, MESSAGES.userRateLimited, 'jwt');
    }
    // A `user`-quota operation asked by a non-JWT caller that a policy let through: the tier quota.
    return this.meter(caller, { ...policy, quota: 'tier' });
  }

  /** The metering of a tier-quota request from its admission (see `meter`). */
  #admitted(a: Admission, caller: Caller, policy: Policy, deferred: Deferred | undefined): Metering | Promise<Metering> {
    if (a.kind !== 'ok') return this.#unsettled(a, caller, policy, deferred!);
    // When both the caller's own quota and the account ceiling ran out, the 429 is the one
    // with the longer wait (README, "Tiers and rate limits": Retry-After is the wait after
    // which a retry can succeed), e.g. the account's day over the key's minute.
    const accountLonger =
      a.account !== null && !a.account.allowed && (a.own.allowed || a.account.exceeded!.retryAfterSec > a.own.exceeded!.retryAfterSec);
    if (!a.own.allowed && !accountLonger) {
      const x = a.own.exceeded!;
      const scope = caller.kind === 'anonymous' ? 'address' : caller.kind;
      return {
        limits: a.own,
        error: rateLimited(
          MESSAGES.rateLimited(x.limit, x.window, caller.tier, x.retryAfterSec),
          x.window,
          x.limit,
          x.reset,
          x.retryAfterSec,
          scope,
        ),
      };
    }
    if (accountLonger) {
      const x = a.account!.exceeded!;
      return {
        limits: { ...a.own, allowed: false, exceeded: x },
        error: rateLimited(
          MESSAGES.accountRateLimited(x.limit, x.window, caller.tier, x.retryAfterSec),
          x.window,
          x.limit,
          x.reset,
          x.retryAfterSec,
          'account',
        ),
      };
    }
    if (caller.kind === 'key') this.#deps.usage.record(caller.keyId);
    return { limits: a.own, error: null };
  }

  /**
   * A deferred cache-hit caller that the admission script did not count: the address is over
   * its failed-auth budget (429), the key was revoked (401, a failed authentication), or its
   * tier may be stale (looked up again, then metered once more with the tier read now; the
   * caller object is updated in place, so the operation sees the new tier).
   */
  async #unsettled(a: Exclude<Admission, { kind: 'ok' }>, caller: Caller, policy: Policy, deferred: Deferred): Promise<Metering> {
    const peekAddress = () => this.#deps.limiter.peek(`ip:${deferred.address}`, 'unauthenticated');
    if (a.kind === 'blocked') return { limits: await peekAddress(), error: this.#tooManyFailures(a.retryAfterSec, a.resetMs) };
    if (caller.kind === 'key') this.#deps.keys.evict(caller.keyId);
    if (a.kind === 'revoked') {
      const r = await this.#revoked(deferred.token, deferred.address);
      return { limits: r.limits, error: r.error };
    }
    const again = await this.authenticate(deferred.header, deferred.policy, deferred.address);
    if (!again.ok) return { limits: again.limits, error: again.error };
    Object.assign(caller, again.caller);
    const denied = this.authorize(caller, policy);
    if (denied) return { limits: await this.peek(caller), error: denied };
    this.#deferred.delete(caller);
    return this.meter(caller, policy);
  }
}

/**
 * The `WWW-Authenticate` value of a 401 (RFC 6750 section 3): no error code when the request
 * carried no credentials, `invalid_token` with the reason otherwise.
 */
export function bearerChallenge(err: ServiceError): string {
  return err.details?.reason === 'missing'
    ? 'Bearer realm="api"'
    : `Bearer realm="api", error="invalid_token", error_description="${err.message.replace(/"/g, "'")}"`;
}

/**
 * The headers of a refused request outside the REST envelope (MCP over HTTP; REST's
 * `sendError` sets `Retry-After` itself): the rate-limit headers of `limits`,
 * and on a 429 or a passing 503 `Retry-After` from the error's `details.retry_after` (seconds,
 * `retryAfterOf`; on a 429 also set when the refusal came from a budget that `limits` does not
 * describe, e.g. failed authentications).
 */
export function refusalHeaders(err: ServiceError, limits: LimitDecision): Record<string, string> {
  const h = rateLimitHeaders(limits);
  const wait = retryAfterOf(err.code, err.details);
  if (wait !== undefined) h['Retry-After'] = String(wait);
  return h;
}

/**
 * Other MCP requests (initialize, tools/list, ping, notifications) per caller per minute, at
 * least: they do not count against the API quota, but each builds a server, so they are capped.
 * A caller's cap is the larger of this and `MCP_CONTROL_PER_CALL` times its tier's tools/calls
 * per minute (`mcpControlCap`).
 */
export const MCP_CONTROL_REQUESTS_PER_MINUTE = 120;

/**
 * Other MCP messages allowed per tools/call of the tier's per-minute limit: a client that
 * connects for each call sends `initialize`, `notifications/initialized` and `tools/list`
 * before its `tools/call`, so the cap must not stop such a client below its tier's quota.
 */
export const MCP_CONTROL_PER_CALL = 3;

/**
 * The per-minute cap on a caller's MCP messages other than tools/call: unauthenticated and
 * free 120, pro 300, api 1,500 (TIER_LIMITS: 5, 10, 100 and 500 requests per minute).
 */
export function mcpControlCap(tier: Tier): number {
  return Math.max(MCP_CONTROL_REQUESTS_PER_MINUTE, MCP_CONTROL_PER_CALL * TIER_LIMITS[tier].minute);
}
