import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

/**
 * A small OIDC-style identity provider for tests, on loopback: it serves the discovery
 * document and a JWKS, and signs tokens with its RS256 key, so the service is exercised
 * exactly as with an external provider (Auth0, Keycloak, ...).
 */
export interface TestIdp {
  issuer: string;
  audience: string;
  /** Signs a JWT for `sub` with this IdP's key; `over` changes claims or header fields (`exp: null` leaves `exp` out). */
  token(
    sub: string,
    over?: { email?: string; sid?: string; iss?: string; aud?: string; exp?: number | null; nbf?: number; kid?: string; alg?: string },
  ): Promise<string>;
  publicJwk: JWK;
  close(): Promise<void>;
}

export async function startTestIdp(audience = 'market-intel-api'): Promise<TestIdp> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid: 'test-key-1', alg: 'RS256', use: 'sig' };
  let issuer = '';
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') {
      res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks`, id_token_signing_alg_values_supported: ['RS256'] }));
    } else if (req.url === '/jwks') {
      res.end(JSON.stringify({ keys: [publicJwk] }));
    } else {
      res.statusCode = 404;
      res.end('{}');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const now = () => Math.floor(Date.now() / 1000);
  return {
    issuer,
    audience,
    publicJwk,
    async token(sub, over = {}) {
      const jwt = new SignJWT({ email: over.email ?? `${sub}@example.com`, ...(over.sid === undefined ? {} : { sid: over.sid }) })
        .setProtectedHeader({ alg: 'RS256', kid: over.kid ?? 'test-key-1' })
        .setSubject(sub)
        .setIssuer(over.iss ?? issuer)
        .setAudience(over.aud ?? audience)
        .setIssuedAt();
      if (over.exp !== null) jwt.setExpirationTime(over.exp ?? now() + 600);
      if (over.nbf !== undefined) jwt.setNotBefore(over.nbf);
      return jwt.sign(privateKey);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
