import type { JWTVerifyGetKey } from 'jose';
import type { Logger } from 'pino';
import { DATABASE_DOWN_MESSAGE, isDependencyDown, loggableError, memoRetrying, ServiceError, unavailable } from '../errors.ts';
import { IdentityProviderUnavailableError } from './jwt-check.ts';

// The embedded identity provider's public surface without better-auth: its constants, its
// interface, its discovery document, and a provider created on first use. better-auth and its
// start-up clean-ups cost 340-425 ms of module loading and database work at start-up, which
// neither /readyz nor keyed API requests need (issue #13, "heavy modules loaded when first
// needed"; docs/benchmarks.md, "Start-up"). src/auth/identity.ts builds the real provider.

/** Where better-auth's endpoints are mounted (`/auth/sign-in/email`, `/auth/token`, `/auth/jwks`, ...). */
export const AUTH_BASE_PATH = '/auth';

/** Signature algorithm of the JWTs the embedded identity provider issues (in the verifier's allow-list, see jwt.ts). */
export const IDP_JWT_ALG = 'ES256';

/**
 * Header carrying the client address (the HTTP edge's client IP, which honours TRUST_PROXY)
 * to better-auth, for its per-IP rate limits and the session's `ip_address`. The HTTP edge
 * drops any value a client sends under this name first, so it cannot be spoofed.
 */
export const CLIENT_IP_HEADER = 'x-identity-client-ip';

/**
 * The embedded identity provider, framework-free: a web-standard `handler` for the requests
 * under AUTH_BASE_PATH (the HTTP edge mounts it, see src/http/identity.ts), the OpenID
 * discovery document, and what the verifier of its JWTs needs (jwt.ts).
 */
export interface EmbeddedIdentity {
  /** `iss` of every JWT, equal to the `issuer` of the discovery document: the service's public URL. */
  issuer: string;
  /** `aud` of every JWT. */
  audience: string;
  /** The public origin requests are addressed to (never the client's Host header). */
  origin: string;
  /** The provider's public keys, read from the database in process (no HTTP round-trip). */
  jwks: JWTVerifyGetKey;
  /**
   * Answers one request under AUTH_BASE_PATH (sign-up, sign-in, token, jwks, sign-out, ...).
   * @throws ServiceError SERVICE_UNAVAILABLE when the database failed during the request,
   *   INTERNAL_ERROR on any other unexpected error (the HTTP edge answers the error envelope).
   */
  handler(request: Request): Promise<Response>;
  /** `GET /.well-known/openid-configuration` body (JSON). */
  discovery: string;
}

/**
 * The OpenID Connect Discovery 1.0 document of the embedded provider (its JWKS part only: it
 * is not a full OpenID Provider), as JSON: `issuer` = `baseUrl`, `jwks_uri` under AUTH_BASE_PATH.
 */
export function discoveryDocument(baseUrl: string): string {
  return JSON.stringify({
    issuer: baseUrl,
    jwks_uri: `${baseUrl}${AUTH_BASE_PATH}/jwks`,
    id_token_signing_alg_values_supported: [IDP_JWT_ALG],
    subject_types_supported: ['public'],
    claims_supported: ['iss', 'aud', 'sub', 'email', 'iat', 'exp'],
    service_documentation: `${baseUrl}/signin`,
  });
}

/** How long a failed creation of the identity provider is answered without a new attempt, ms. */
export const LAZY_IDENTITY_RETRY_MS = 5000;

/** An EmbeddedIdentity created on first use, with `warm()` to create it ahead of the first request. */
export interface LazyIdentity extends EmbeddedIdentity {
  /** Creates the provider now if it is not created yet; never rejects (a failure is logged, and the next use tries again). */
  warm(): Promise<void>;
}

/**
 * The embedded identity provider, created by `create` (src/auth/identity.ts
 * `createEmbeddedIdentity`, imported there) on its first use: a request under AUTH_BASE_PATH,
 * a JWT to verify, or `warm()` (the server calls it once it listens). Issuer, audience, origin
 * and the discovery document are known without it. Concurrent first uses share one creation;
 * a failed creation is not kept, so the next use tries again.
 *
 * Errors: while the provider cannot be created, `handler` throws ServiceError
 * SERVICE_UNAVAILABLE when the database is down (`isDependencyDown`), INTERNAL_ERROR otherwise
 * (a broken install or configuration; the cause is logged, without query parameters), and
 * `jwks` throws IdentityProviderUnavailableError (the verifier answers 503 rather than calling
 * the token invalid). After a failure, uses within `retryMs` (LAZY_IDENTITY_RETRY_MS) get the
 * same failure without a new attempt, so a broken database is not hit on every request.
 *
 * @param opts.baseUrl public origin of the service, without trailing slash (the issuer).
 * @param opts.audience `aud` of the JWTs (AUTH_AUDIENCE).
 * @param opts.retryMs how long a failed creation is kept before the next use tries again, ms.
 */
export function lazyIdentity(
  opts: { baseUrl: string; audience: string; log: Logger; retryMs?: number },
  create: () => Promise<EmbeddedIdentity>,
): LazyIdentity {
  const baseUrl = opts.baseUrl.replace(/\/+$/, '');
  // A failure is kept `retryMs`, so a broken database is not hit on every request.
  const get = memoRetrying(create, {
    retryMs: opts.retryMs ?? LAZY_IDENTITY_RETRY_MS,
    onError: (err) => opts.log.error({ err: loggableError(err) }, 'identity provider could not be created'),
  });
  return {
    issuer: baseUrl,
    audience: opts.audience,
    origin: new URL(baseUrl).origin,
    discovery: discoveryDocument(baseUrl),
    async jwks(header, token) {
      let real: EmbeddedIdentity;
      try {
        real = await get();
      } catch {
        throw new IdentityProviderUnavailableError('The identity provider is not available');
      }
      return real.jwks(header, token);
    },
    async handler(request) {
      let real: EmbeddedIdentity;
      try {
        real = await get();
      } catch (err) {
        // The database down is a 503 (try again); anything else is the server's own failure (500).
        if (isDependencyDown(err)) throw unavailable(DATABASE_DOWN_MESSAGE);
        throw new ServiceError('INTERNAL_ERROR', 'Internal server error: the identity provider could not be started');
      }
      return real.handler(request);
    },
    async warm() {
      await get().then(
        () => undefined,
        () => undefined,
      );
    },
  };
}
