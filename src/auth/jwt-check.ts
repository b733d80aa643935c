/**
 * The JWT check's interface and errors, without JOSE: the access rules (services/access.ts) and
 * the lazy identity provider import these at start-up, and `jose` (src/auth/jwt.ts) is loaded
 * only when a verifier is made: with AUTH_ISSUER, or on the first JWT for the embedded
 * provider (src/server.ts `lazyJwtVerifier`).
 */

/** Verifies the JWT of a signed-in user; rejects with AuthError (IdentityProviderUnavailableError when the provider cannot be reached). */
export interface JwtCheck {
  /**
   * @returns the subject (user id), the `email` claim (or null) and the `sid` claim (the
   *   embedded provider's sign-in session id; null in a token without one, e.g. an external
   *   provider's).
   */
  verify(token: string): Promise<{ sub: string; email: string | null; sid: string | null }>;
  /**
   * How a client gets a JWT this checker accepts, for the refusals that need one (services/access.ts
   * MESSAGES: "Key management needs the JWT of a signed-in user ...: <howToGet>"); absent, the
   * embedded identity provider's way (/signin, or POST /auth/sign-in/email then GET /auth/token).
   */
  readonly howToGet?: string;
}

/** A JWT was refused; the message is safe to show (it never contains the token). */
export class AuthError extends Error {
  override name = 'AuthError';
}

/** The identity provider (discovery document or JWKS) could not be reached: not the token's fault. */
export class IdentityProviderUnavailableError extends AuthError {
  override name = 'IdentityProviderUnavailableError';
}

/**
 * A valid JWT of the embedded provider whose sign-in session has ended (signed out, revoked
 * or expired): the token is refused before its own expiry (src/server.ts `lazyJwtVerifier`).
 */
export class SessionEndedError extends AuthError {
  override name = 'SessionEndedError';
}
