import { createRemoteJWKSet, customFetch, jwtVerify, type JWTVerifyGetKey } from 'jose';
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

/** Longest wait on one request to the identity provider (its discovery document, its JWKS), ms. */
export const IDP_FETCH_TIMEOUT_MS = 5000;

/**
 * After a failed request to the identity provider (unreachable, timed out, not 200, not a
 * discovery document or JWKS), JWTs are refused as unavailable (503) for this long without
 * asking it again, ms: an outage costs the provider one request per interval, whatever the
 * traffic.
 */
export const IDP_RETRY_MS = 5000;

/** What went wrong with a request, in a few words for the log (never a token: none is sent). */
function describe(e: unknown): string {
  const err = e as { name?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
  if (err?.name === 'TimeoutError') return `no answer within ${IDP_FETCH_TIMEOUT_MS} ms`;
  const cause = err?.cause?.code ?? err?.cause?.message;
  return `${String(err?.message ?? e)}${cause ? ` (${String(cause)})` : ''}`;
}

/**
 * A GET of a JSON document from the identity provider, bounded by IDP_FETCH_TIMEOUT_MS
 * (headers and body). Any failure, including an answer other than 200 or a body that
 * `valid` refuses, is IdentityProviderUnavailableError naming `what`, the URL and why; after
 * one, `get` rejects at once with it for IDP_RETRY_MS without a request.
 */
function providerGetter(
  what: string,
  opts: { retryMs: number; redirect: RequestRedirect },
): (url: string, valid: (doc: unknown) => string | null) => Promise<unknown> {
  let failed: { err: IdentityProviderUnavailableError; at: number } | null = null;
  return async (url, valid) => {
    if (failed && Date.now() - failed.at < opts.retryMs) throw failed.err;
    try {
      const res = await fetch(url, {
        signal: AbortSignal.timeout(IDP_FETCH_TIMEOUT_MS),
        redirect: opts.redirect,
        headers: { accept: 'application/json' },
      });
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => {});
        throw new Error(`answered HTTP ${res.status}`);
      }
      let doc: unknown;
      try {
        doc = JSON.parse(await res.text());
      } catch (e) {
        if ((e as Error)?.name === 'TimeoutError') throw e;
        throw new Error('answered a body that is not JSON', { cause: e });
      }
      const problem = valid(doc);
      if (problem) throw new Error(problem);
      failed = null;
      return doc;
    } catch (e) {
      const err = new IdentityProviderUnavailableError(
        `The identity provider's ${what} ${url} could not be used: ${describe(e)}; JWTs are refused (503) until it can, asked again after ${opts.retryMs} ms`,
      );
      failed = { err, at: Date.now() };
      throw err;
    }
  };
}

/**
 * Verifies the JWTs of signed-in users (RFC 7519) with jose: signature against the identity
 * provider's JWKS, algorithm in JWT_ALGORITHMS, `iss` equal to `issuer`, `aud` containing
 * `audience`, `exp` required and in the future, `nbf` (when present) in the past, `sub`
 * required (a non-empty string), with CLOCK_TOLERANCE_SEC of clock skew. Without `jwks`,
 * the key set is found by OpenID Connect Discovery 1.0 at
 * `<issuer>/.well-known/openid-configuration` (whose `issuer` must equal the configured one)
 * on first use. jose keeps the JWKS 10 minutes and refetches it on an unknown `kid` (at most
 * once per 30 s), so key rotation needs no restart. Each request to the provider waits at most
 * IDP_FETCH_TIMEOUT_MS; one that fails (unreachable, timed out, not 200, not a discovery
 * document or JWKS) is IdentityProviderUnavailableError (503, not the token's fault), its
 * message saying which document and why (for the log), and for `retryMs` (IDP_RETRY_MS)
 * afterwards tokens that need that document are refused the same way without a new request.
 * @returns a checker whose `verify(token)` resolves to `{sub, email, sid}` (sid from the `sid`
 *   claim, or null; email from the `email` claim, or null, also when `email_verified` is
 *   present and neither true nor "true", e.g. false or "false") or rejects with AuthError.
 */
export function createJwtVerifier(opts: { issuer: string; audience: string; jwks?: JWTVerifyGetKey; retryMs?: number }): JwtCheck {
  let keys: Promise<JWTVerifyGetKey> | null = opts.jwks ? Promise.resolve(opts.jwks) : null;
  const retryMs = opts.retryMs ?? IDP_RETRY_MS;
  // The discovery document may redirect (as the old fetch followed); the JWKS not (as jose's own fetch).
  const getDiscovery = providerGetter('OIDC discovery document', { retryMs, redirect: 'follow' });
  const getJwks = providerGetter('JWKS', { retryMs, redirect: 'manual' });
  const discover = async (): Promise<JWTVerifyGetKey> => {
    const url = `${opts.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const doc = (await getDiscovery(url, (d) => {
      const issuer = (d as { issuer?: unknown } | null)?.issuer;
      if (issuer !== opts.issuer)
        return `its issuer ${JSON.stringify(issuer)} is not AUTH_ISSUER ${JSON.stringify(opts.issuer)} (set AUTH_ISSUER to the provider's issuer exactly, trailing slash included)`;
      const jwksUri = (d as { jwks_uri?: unknown }).jwks_uri;
      return typeof jwksUri === 'string' && URL.canParse(jwksUri) ? null : 'it has no jwks_uri URL';
    })) as { jwks_uri: string };
    // jose keeps the keys (10 minutes) and refetches on an unknown `kid` (at most every 30 s);
    // every fetch goes through getJwks (bounded, failures kept IDP_RETRY_MS).
    return createRemoteJWKSet(new URL(doc.jwks_uri), {
      timeoutDuration: IDP_FETCH_TIMEOUT_MS,
      [customFetch]: async (url: string) => {
        const set = await getJwks(url, (d) =>
          Array.isArray((d as { keys?: unknown } | null)?.keys) ? null : 'its body is not a JWKS (no "keys" array)',
        );
        return Response.json(set);
      },
    });
  };
  return {
    // No /signin or /auth here: this service does not sign users in, the provider does.
    howToGet: `get an access token for the audience ${opts.audience} from the identity provider ${opts.issuer} (this service does not sign users in itself; its /auth routes are off)`,
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
      } catch (e) {
        if (e instanceof IdentityProviderUnavailableError) throw e;
        throw new IdentityProviderUnavailableError(`The identity provider could not be reached: ${describe(e)}`);
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
          // A provider that says the address is not verified (OpenID Connect Core 1.0 §5.1,
          // `email_verified: false`) gives no email: the operator's `users set-tier EMAIL` must
          // not reach an account that merely claims someone's address. Some providers send the
          // claim as a string (AWS Cognito: "false"/"true"); any value other than true or
          // "true" counts as not verified, an absent claim as the provider's word.
          email:
            typeof payload.email === 'string' &&
            (payload.email_verified === undefined || payload.email_verified === true || payload.email_verified === 'true')
              ? payload.email
              : null,
          sid: typeof payload.sid === 'string' && payload.sid !== '' ? payload.sid : null,
        };
      } catch (e) {
        if (e instanceof IdentityProviderUnavailableError) throw e;
        if (isUnreachable(e)) throw new IdentityProviderUnavailableError(`The identity provider could not be reached: ${describe(e)}`);
        throw new AuthError('Invalid or expired token');
      }
    },
  };
}
