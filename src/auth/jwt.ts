import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { AuthError, IdentityProviderUnavailableError, type JwtCheck, SessionEndedError } from './jwt-check.ts';

export { AuthError, IdentityProviderUnavailableError, type JwtCheck, SessionEndedError };

/** Network failures and JWKS time-outs, as opposed to a token that fails verification. */
function isUnreachable(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return (
    code === 'ERR_JWKS_TIMEOUT' ||
    (e instanceof TypeError && /fetch failed/i.test(e.message)) ||
    (e as Error)?.name === 'TimeoutError' ||
    e instanceof IdentityProviderUnavailableError
  );
}

/**
 * Signature algorithms accepted for JWTs: asymmetric only, so a token can never be signed
 * with a public key as an HMAC secret, and `none` is never accepted (RFC 8725 section 3.1).
 */
export const JWT_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const;

/** Seconds of clock skew tolerated on `exp` and `nbf`. */
export const CLOCK_TOLERANCE_SEC = 5;

/**
 * Verifies the JWTs of signed-in users (RFC 7519) with jose: signature against the identity
 * provider's JWKS, algorithm in JWT_ALGORITHMS, `iss` equal to `issuer`, `aud` containing
 * `audience`, `exp` required and in the future, `nbf` (when present) in the past, `sub`
 * required (a non-empty string), with CLOCK_TOLERANCE_SEC of clock skew. Without `jwks`,
 * the key set is found by OpenID Connect Discovery 1.0 at
 * `<issuer>/.well-known/openid-configuration` (whose `issuer` must equal the configured one)
 * on first use; a failed discovery is retried on the next call. jose refetches the JWKS on an
 * unknown `kid` (rate-limited), so key rotation needs no restart.
 * @returns a checker whose `verify(token)` resolves to `{sub, email, sid}` (sid from the `sid`
 *   claim, or null; email from the `email`
 *   claim, or null) or rejects with AuthError.
 */
export function createJwtVerifier(opts: { issuer: string; audience: string; jwks?: JWTVerifyGetKey }): JwtCheck {
  let keys: Promise<JWTVerifyGetKey> | null = opts.jwks ? Promise.resolve(opts.jwks) : null;
  const discover = async (): Promise<JWTVerifyGetKey> => {
    const url = `${opts.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const res = await fetch(url, { signal: AbortSignal.timeout(5000), headers: { accept: 'application/json' } });
    if (!res.ok) throw new AuthError(`OIDC discovery failed: ${url} answered ${res.status}`);
    const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
    if (doc.issuer !== opts.issuer) throw new AuthError('OIDC discovery: the issuer in the document does not match the configured issuer');
    if (typeof doc.jwks_uri !== 'string') throw new AuthError('OIDC discovery: no jwks_uri');
    return createRemoteJWKSet(new URL(doc.jwks_uri));
  };
  return {
    async verify(token: string) {
      if (!keys) {
        keys = discover();
        keys.catch(() => {
          keys = null;
        });
      }
      let getKey: JWTVerifyGetKey;
      try {
        getKey = await keys;
      } catch {
        throw new IdentityProviderUnavailableError('The identity provider could not be reached');
      }
      try {
        const { payload } = await jwtVerify(token, getKey, {
          issuer: opts.issuer,
          audience: opts.audience,
          algorithms: [...JWT_ALGORITHMS],
          clockTolerance: CLOCK_TOLERANCE_SEC,
          requiredClaims: ['exp', 'sub'],
        });
        if (typeof payload.sub !== 'string' || payload.sub === '') throw new AuthError('Invalid token subject');
        return {
          sub: payload.sub,
          email: typeof payload.email === 'string' ? payload.email : null,
          sid: typeof payload.sid === 'string' && payload.sid !== '' ? payload.sid : null,
        };
      } catch (e) {
        if (isUnreachable(e)) throw new IdentityProviderUnavailableError('The identity provider could not be reached');
        throw new AuthError('Invalid or expired token');
      }
    },
  };
}
