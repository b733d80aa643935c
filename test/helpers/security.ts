import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { checksum, KEY_PREFIX } from '../../src/auth/api-keys.ts';
import type { Tier } from '../../src/auth/tiers.ts';
import { ErrorEnvelopeSchema } from '../../src/http/envelope.ts';
import type { Harness } from './harness.ts';

/**
 * The shared security suite (after unkey's `runSharedRoleTests`): every file of a protected
 * resource calls `runSharedSecurityTests` for each of its protected routes, so each route is
 * checked for the same refusals: no credential, a malformed key, a bad checksum, an unknown
 * key, a revoked key, a garbage bearer (all 401 UNAUTHORIZED with WWW-Authenticate), an API
 * key where a JWT is required, the wrong tier (403 TIER_REQUIRED) and another user's object
 * (404 NOT_FOUND, no existence leak).
 */

/** The policy of a route (services/access.ts): `user` = JWT only, `api-key-or-user` = key or JWT. */
export type PolicyKind = 'public' | 'api-key' | 'api-key-or-user' | 'user';

/** The objects the suite creates once per harness and routes refer to. */
export interface SecurityContext {
  /** The owner (user `sec-owner`): a JWT, a free key, its id. */
  ownerJwt: string;
  ownerKey: string;
  ownerKeyId: string;
  /** Another user (`sec-other`), with a free key. */
  otherJwt: string;
  otherKey: string;
  /** A revoked key of the owner. */
  revokedKey: string;
  /** A thesis of the owner. */
  thesisId: string;
}

/** A route under test. */
export interface SecuredRoute {
  /** Test-name prefix, e.g. `GET /thesis/{id}`. */
  name: string;
  method: string;
  /** The path to call (may use the context's objects). */
  path: (ctx: SecurityContext) => string;
  /** A valid body, for routes that take one. */
  body?: (ctx: SecurityContext) => unknown;
  policy: PolicyKind;
  /** Tiers the route requires (tests the 403 with the owner's free key). */
  tiers?: readonly Tier[];
  /** The route acts on one of the owner's objects: another user gets 404. */
  ownerScoped?: boolean;
}

const contexts = new WeakMap<Harness, Promise<SecurityContext>>();

/** The suite's objects on this harness, created on first use (shared by every route of the file). */
export function securityContext(h: Harness): Promise<SecurityContext> {
  let c = contexts.get(h);
  if (!c) {
    c = (async () => {
      const ownerJwt = await h.jwt('sec-owner', 'sec-owner@example.com');
      const otherJwt = await h.jwt('sec-other', 'sec-other@example.com');
      const owner = await h.createKey(ownerJwt);
      const other = await h.createKey(otherJwt);
      const revoked = await h.createKey(ownerJwt);
      assert.equal((await h.request('POST', '/api/v1/keys/revoke', { token: ownerJwt, body: { key_id: revoked.id } })).status, 200);
      const t = await h.request('POST', '/api/v1/thesis', {
        token: owner.key,
        body: { asset: 'bitcoin', direction: 'long', title: 'BTC up', conditions: [] },
      });
      assert.equal(t.status, 201, t.raw);
      return {
        ownerJwt,
        ownerKey: owner.key,
        ownerKeyId: owner.id,
        otherJwt,
        otherKey: other.key,
        revokedKey: revoked.key,
        thesisId: t.body.data.id,
      };
    })();
    contexts.set(h, c);
  }
  return c;
}

const random = 'A'.repeat(32);
/** Credentials every protected route refuses with 401 (the first: none at all). */
export const BAD_CREDENTIALS: [string, (c: SecurityContext) => string | undefined][] = [
  ['no credential', () => undefined],
  ['malformed key', () => 'svc_live_short'],
  ['bad checksum', () => `${KEY_PREFIX}${random}000000`],
  ['unknown key', () => `${KEY_PREFIX}${random}${checksum(random)}`],
  ['revoked key', (c) => c.revokedKey],
  ['garbage bearer', () => 'not-a-token'],
];

/**
 * Registers the shared security tests for `route` in the current describe block; `getHarness`
 * returns the file's harness (started in a `before` hook).
 */
export function runSharedSecurityTests(getHarness: () => Harness, route: SecuredRoute): void {
  let ctx: SecurityContext;
  before(async () => {
    ctx = await securityContext(getHarness());
  });
  const call = (token: string | undefined) => getHarness().request(route.method, route.path(ctx), { token, body: route.body?.(ctx) });

  if (route.policy === 'public') {
    // A present but invalid credential is 401, never a silent downgrade to the unauthenticated tier.
    for (const [what, tok] of BAD_CREDENTIALS.slice(1)) {
      test(`${route.name}: ${what} -> 401 (no silent downgrade)`, async () => {
        const res = await call(tok(ctx));
        assert.equal(res.status, 401, res.raw);
        assert.equal(res.body.error.code, 'UNAUTHORIZED');
      });
    }
    test(`${route.name}: a JWT -> 401`, async () => {
      assert.equal((await call(ctx.ownerJwt)).status, 401);
    });
    return;
  }

  for (const [what, tok] of BAD_CREDENTIALS) {
    test(`${route.name}: ${what} -> 401`, async () => {
      const res = await call(tok(ctx));
      assert.equal(res.status, 401, res.raw);
      ErrorEnvelopeSchema.parse(res.body);
      assert.equal(res.body.error.code, 'UNAUTHORIZED');
      assert.match(String(res.headers['www-authenticate']), /^Bearer/);
      assert.equal(res.headers['x-service-tier'], 'unauthenticated');
    });
  }
  if (route.policy === 'user') {
    test(`${route.name}: an API key instead of a JWT -> 401`, async () => {
      assert.equal((await call(ctx.ownerKey)).status, 401);
    });
  }
  if (route.policy === 'api-key') {
    test(`${route.name}: a JWT instead of an API key -> 401`, async () => {
      assert.equal((await call(ctx.ownerJwt)).status, 401);
    });
  }
  if (route.tiers) {
    const tiers = route.tiers;
    test(`${route.name}: wrong tier -> 403 TIER_REQUIRED naming the tiers`, async () => {
      const res = await getHarness().request(route.method, route.path(ctx), { token: ctx.ownerKey });
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, 'TIER_REQUIRED');
      assert.deepEqual(res.body.error.details.required_tiers, tiers);
      assert.match(res.body.error.message, new RegExp(tiers.join(' or ')));
      assert.equal(res.headers['x-service-tier'], 'free');
    });
  }
  if (route.ownerScoped) {
    test(`${route.name}: another user's object -> 404`, async () => {
      const cred = route.policy === 'user' ? ctx.otherJwt : ctx.otherKey;
      const res = await call(cred);
      assert.equal(res.status, 404, res.raw);
      assert.equal(res.body.error.code, 'NOT_FOUND');
    });
    if (route.policy === 'api-key-or-user') {
      test(`${route.name}: another user's object with their JWT -> 404`, async () => {
        const res = await call(ctx.otherJwt);
        assert.equal(res.status, 404, res.raw);
        assert.equal(res.body.error.code, 'NOT_FOUND');
      });
    }
  }
}
