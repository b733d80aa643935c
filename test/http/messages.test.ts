import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { checksum, KEY_PREFIX } from '../../src/auth/api-keys.ts';
import { expectError, harnessUnavailable, startHarness, testDatabase, type Harness } from '../helpers/harness.ts';

/**
 * Refusal messages that say what to do next (services/access.ts MESSAGES, shared by REST and
 * MCP): how to get a key, which credential an endpoint takes, which key was refused (by its
 * display prefix only), how long to wait. The chain 404 is in market.test.ts, the MCP side in
 * test/mcp/.
 */

const DATABASE = testDatabase();
const SKIP = (await harnessUnavailable({ database: DATABASE })) ?? undefined;
if (SKIP) console.log(SKIP);

let h: Harness;
const harness = () => h;
before(async () => {
  if (!SKIP) h = await startHarness({ database: DATABASE });
});
after(async () => {
  await h?.stop();
});

const HOW_TO_GET_A_KEY = /sign in at \/signin, create a key there .*send it as Authorization: Bearer svc_live_\.\.\./;

describe('messages that say what to do next', { skip: SKIP }, () => {
  test('an anonymous 429 says how to get a key and how long to wait', async () => {
    const ip = harness().freshIp();
    let r = await harness().request('GET', '/api/v1/assets', { ip });
    for (let i = 0; i < 5; i++) r = await harness().request('GET', '/api/v1/assets', { ip });
    expectError(r, 429, 'RATE_LIMITED');
    assert.match(r.body.error.message, /^Rate limit exceeded: 5 requests per minute for the unauthenticated tier; retry in \d+ s/);
    assert.match(r.body.error.message, HOW_TO_GET_A_KEY);
    assert.equal(r.body.error.details.window, 'minute');
    assert.equal(String(r.body.error.details.retry_after), r.headers['retry-after']);
  });

  test('a key in the query string is refused (400) with what to do instead, and nothing is counted', async () => {
    const { key } = await harness().keyFor('pro');
    const ip = harness().freshIp();
    const remaining: string[] = [];
    for (const q of [`api_key=${key}`, `apiKey=${key}`, `token=${key}`, 'key=x']) {
      const r = await harness().request('GET', `/api/v1/signals/btc?${q}`, { ip });
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.match(r.body.error.message, /not accepted .*send the API key as Authorization: Bearer <key>/);
      assert.equal(r.body.error.details.location, 'querystring');
      assert.equal(r.body.error.details.field, q.split('=')[0]);
      assert.ok(!JSON.stringify(r.body).includes(key), 'the key is not echoed');
      remaining.push(String(r.headers['x-ratelimit-remaining']));
    }
    // The headers describe the address's quota, untouched by the refusals: an anonymous request then spends one.
    assert.equal(new Set(remaining).size, 1, remaining.join(','));
    const anon = await harness().request('GET', '/api/v1/assets', { ip });
    assert.equal(Number(anon.headers['x-ratelimit-remaining']), Number(remaining[0]) - 1);
    // With the key where it belongs, the same request is served at the key's tier.
    const ok = await harness().request('GET', '/api/v1/signals/btc', { ip, token: key });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['x-service-tier'], 'pro');
  });

  test('a key in an X-API-Key (or similar) header without Authorization is refused (400) with what to do instead', async () => {
    const { key } = await harness().keyFor('pro');
    const ip = harness().freshIp();
    const before = await harness().request('GET', '/api/v1/assets', { ip });
    for (const name of ['X-API-Key', 'api-key', 'apikey', 'X-Auth-Token']) {
      const r = await harness().request('GET', '/api/v1/signals/btc', { ip, headers: { [name]: key } });
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.equal(r.body.error.message, `The ${name.toLowerCase()} header is not read: send the API key as Authorization: Bearer <key>`);
      assert.deepEqual(r.body.error.details, { location: 'headers', field: name.toLowerCase() });
      assert.ok(!JSON.stringify(r.body).includes(key), 'the key is not echoed');
      // Nothing is counted: the address's quota is where the anonymous request left it.
      assert.equal(Number(r.headers['x-ratelimit-remaining']), Number(before.headers['x-ratelimit-remaining']));
    }
    // Beside Authorization it is not read and does no harm: served at the Bearer key's tier.
    const both = await harness().request('GET', '/api/v1/signals/btc', { ip, token: key, headers: { 'X-API-Key': 'anything' } });
    assert.equal(both.status, 200, both.raw);
    assert.equal(both.headers['x-service-tier'], 'pro');
  });

  test('the key-management budget: the 31st request in a minute is a 429 with scope jwt and the limit', async () => {
    const jwt = await harness().jwt(`budget-${Date.now()}`);
    let r = await harness().request('GET', '/api/v1/keys', { token: jwt });
    assert.equal(r.status, 200, r.raw);
    for (let i = 0; i < 30 && r.status === 200; i++) r = await harness().request('GET', '/api/v1/keys', { token: jwt });
    expectError(r, 429, 'RATE_LIMITED');
    // What to do next: how long to wait (the Retry-After value), as every other 429 says.
    assert.equal(
      r.body.error.message,
      `Too many key-management requests for this user: at most 30 per minute; retry in ${r.headers['retry-after']} s`,
    );
    assert.deepEqual([r.body.error.details.scope, r.body.error.details.window, r.body.error.details.limit], ['jwt', 'minute', 30]);
  });

  test('a query parameter given twice says so, not that its value is malformed', async () => {
    const { key } = await harness().keyFor('api', 'twice');
    for (const [url, field] of [
      ['/api/v1/prices/btc?days=30&days=30', 'days'],
      ['/api/v1/signals?include_factors=true&include_factors=true', 'include_factors'],
    ]) {
      const r = await harness().request('GET', url!, { token: key });
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.equal(r.body.error.message, `Invalid query parameter '${field}': given 2 times; give it once`);
      assert.equal(r.body.error.details.field, field);
    }
  });

  test('a 429 for a key does not tell its holder to get a key', async () => {
    const { key } = await harness().keyFor('free');
    let r = await harness().request('GET', '/api/v1/assets', { token: key });
    for (let i = 0; i < 10; i++) r = await harness().request('GET', '/api/v1/assets', { token: key });
    expectError(r, 429, 'RATE_LIMITED');
    assert.match(
      r.body.error.message,
      /^Rate limit exceeded: 10 requests per minute for the free tier; retry in \d+ s \(higher tiers have higher limits: the operator sets your plan, README "Tiers and rate limits"\)$/,
    );
  });

  test('a JWT on an API endpoint says API endpoints take a svc_live_ key and JWTs are for key management and theses', async () => {
    const jwt = await harness().jwt('msg-jwt-user');
    for (const path of ['/api/v1/signals', '/api/v1/signal-history/bitcoin']) {
      const r = await harness().request('GET', path, { token: jwt });
      expectError(r, 401, 'UNAUTHORIZED');
      assert.match(
        r.body.error.message,
        /API endpoints and MCP take an API key \(Authorization: Bearer svc_live_\.\.\.\), not a JWT/,
        path,
      );
      assert.match(r.body.error.message, /JWTs are for key management .* and theses/, path);
      assert.match(String(r.headers['www-authenticate']), /error="invalid_token", error_description="Invalid API key: API endpoints/);
    }
  });

  test('a refused key is named by its display prefix only, with the reason and what to do', async () => {
    const random = 'Q'.repeat(32);
    const { jwt } = await harness().keyFor('free');
    const revoked = await harness().createKey(jwt);
    const rv = await harness().request('POST', '/api/v1/keys/revoke', { token: jwt, body: { key_id: revoked.id } });
    assert.equal(rv.status, 200, rv.raw);
    const cases: [string, RegExp][] = [
      [`${KEY_PREFIX}${random}${checksum(random)}`, /^Invalid API key svc_live_QQQQ\.\.\.: no such key .*sign in at \/signin/],
      [`${KEY_PREFIX}${random}000000`, /^Invalid API key svc_live_QQQQ\.\.\.: checksum mismatch \(mistyped or truncated\)/],
      [`${KEY_PREFIX}short`, /^Invalid API key svc_live_shor\.\.\.: malformed/],
      [revoked.key, /: it has been revoked; create a new key at \/signin/],
    ];
    for (const [key, message] of cases) {
      const r = await harness().request('GET', '/api/v1/signals', { token: key });
      expectError(r, 401, 'UNAUTHORIZED');
      assert.match(r.body.error.message, message, key);
      const rest = key.slice(KEY_PREFIX.length + 4);
      if (rest.length >= 8) {
        assert.ok(!r.raw.includes(rest), 'the rest of the key is never echoed');
        assert.ok(!String(r.headers['www-authenticate']).includes(rest));
      }
    }
  });

  test('key management without a JWT, with an API key or with a bad JWT says how to get a JWT from the external identity provider', async () => {
    // The harness runs with AUTH_ISSUER (an external provider): no /signin or /auth here, so the
    // refusal names the provider and the audience (the embedded provider's words: test/auth/identity.test.ts).
    const { key } = await harness().keyFor('free');
    const { issuer, audience } = harness().idp;
    for (const token of [undefined, key, 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln']) {
      const r = await harness().request('GET', '/api/v1/keys', { token });
      expectError(r, 401, 'UNAUTHORIZED');
      assert.ok(
        r.body.error.message.includes(`get an access token for the audience ${audience} from the identity provider ${issuer}`),
        r.body.error.message,
      );
      assert.doesNotMatch(r.body.error.message, /\/auth\/sign-in\/email|\/signin/);
    }
  });

  test('an operation that needs a key, called without one, says how to get one', async () => {
    const r = await harness().request('GET', '/api/v1/signal-history/bitcoin');
    expectError(r, 401, 'UNAUTHORIZED');
    assert.match(r.body.error.message, HOW_TO_GET_A_KEY);
    // Only an API key works here: the message does not offer a JWT.
    assert.match(r.body.error.message, /^This operation needs an API key: /);
    assert.doesNotMatch(r.body.error.message, /JWT \(bearer token\)/);
  });

  test('a JSON body that is not an object (an array, a string, a number, null) is refused naming the body, not an empty field', async () => {
    const { key, jwt } = await harness().keyFor('free');
    for (const [path, token, body, got] of [
      ['/api/v1/thesis', key, [], 'an array'],
      ['/api/v1/thesis', key, [1], 'an array'],
      ['/api/v1/thesis', jwt, 'btc', 'a string'],
      ['/api/v1/keys/create', jwt, [], 'an array'],
      ['/api/v1/keys/revoke', jwt, 3, 'an integer'],
      ['/api/v1/thesis', key, null, 'null'],
      ['/api/v1/keys/revoke', jwt, null, 'null'],
      // Its body is optional, but a JSON null is a body, and not an object (no body at all is none: keys.test.ts).
      ['/api/v1/keys/create', jwt, null, 'null'],
    ] as const) {
      const r = await harness().request('POST', path, { token, body });
      expectError(r, 400, 'INVALID_PARAMETER');
      assert.deepEqual(r.body.error.details, { location: 'body', field: 'body' }, `${path} ${JSON.stringify(body)}`);
      assert.equal(
        r.body.error.message,
        `Invalid body: expected a JSON object, got ${got}; send the fields as a JSON object ({"name": value, ...}; the API reference at /docs lists this route's fields)`,
      );
    }
  });

  test('theses and the dashboard data, called without a credential, say that an API key or a JWT works, and how to get each', async () => {
    for (const [method, path, body] of [
      ['POST', '/api/v1/thesis', { asset: 'btc', direction: 'long' }],
      ['GET', '/api/v1/thesis', undefined],
      ['GET', '/api/v1/thesis/00000000-0000-4000-8000-000000000000/health', undefined],
      // The dashboard sends the signed-in user's JWT where the API wants a key.
      ['GET', '/app/data/signal-history/btc', undefined],
    ] as const) {
      const r = await harness().request(method, path, { body });
      expectError(r, 401, 'UNAUTHORIZED');
      assert.equal(r.body.error.details.reason, 'missing', path);
      assert.match(r.body.error.message, /^This operation needs an API key or a signed-in user's JWT \(bearer token\)/, path);
      assert.match(r.body.error.message, HOW_TO_GET_A_KEY, path);
      // The harness's identity provider is external (AUTH_ISSUER): the JWT comes from it.
      assert.match(r.body.error.message, /For a JWT: get an access token for the audience .* from the identity provider http/, path);
    }
  });
});
