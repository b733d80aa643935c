import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { startHarness, type Harness, type HarnessResponse } from '../helpers/harness.ts';

/**
 * Real answers of the service against the OpenAPI document it serves (docs/openapi.md): each
 * response's status is one its operation documents, its body validates against the documented
 * schema of that status (JSON Schema 2020-12 with formats: `required`,
 * `additionalProperties: false`, `format: date-time`), its documented headers are there and
 * valid; every timestamp, day and UUID the service sends is typed as one in the document (a
 * generated client gets a string it cannot tell from any other otherwise); and the parameter
 * defaults the descriptions state are the schemas' `default` and what the service applies.
 * test/http/openapi.test.ts checks the document on its own (lint, shared responses, size).
 */

const METHODS = ['get', 'post', 'delete'] as const;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

let h: Harness;
let doc: any;
let ajv: Ajv2020;

before(async () => {
  h = await startHarness();
  const res = await h.request('GET', '/api/v1/openapi.json');
  assert.equal(res.status, 200);
  doc = res.body;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  (ajvFormats as unknown as (a: Ajv2020) => void)(ajv);
  ajv.addSchema(doc, 'doc');
});
after(() => h?.stop());

const unescape = (k: string) => k.replace(/~1/g, '/').replace(/~0/g, '~');
const escape = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');

/** A local `$ref` resolved, and the JSON pointer of what it points to. */
function resolve(node: any, at: string[]): { node: any; at: string[] } {
  let n = node;
  let p = at;
  while (n?.$ref) {
    p = (n.$ref as string).replace(/^#\//, '').split('/').map(unescape);
    n = p.reduce((o: any, k) => o?.[k], doc);
  }
  return { node: n, at: p };
}

/** The document's path template a request path matches (`/api/v1/thesis/{id}`). */
function templateOf(path: string): string {
  const bare = path.split('?')[0]!;
  const found = Object.keys(doc.paths).find((t) => new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(bare));
  assert.ok(found, `${bare}: no path of the document matches`);
  return found;
}

/** Paths in a body whose value is a day, an instant or a UUID that the schema does not type as one. */
function untyped(schema: any, value: unknown, where: string, out: string[]): void {
  const s = resolve(schema, []).node;
  if (!s || value === null || value === undefined) return;
  const branches: any[] | undefined = s.anyOf ?? s.oneOf;
  if (branches) {
    const kinds = branches.map((b) => resolve(b, []).node).filter((b) => b.type !== 'null');
    const match = kinds.find((b) =>
      typeof value === 'string'
        ? b.type === 'string' || b.enum || b.const !== undefined
        : Array.isArray(value)
          ? b.type === 'array'
          : typeof value === 'object'
            ? b.type === 'object'
            : true,
    );
    if (match) untyped(match, value, where, out);
    return;
  }
  if (typeof value === 'string') {
    const kind = DATE.test(value) ? 'date' : DATE_TIME.test(value) ? 'date-time' : UUID.test(value) ? 'uuid' : null;
    if (kind && !s.format && !s.pattern && !s.enum && s.const === undefined)
      out.push(`${where}: a ${kind} (${value}) typed as a bare string`);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => untyped(s.items, v, `${where}[${i}]`, out));
  } else if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (s.properties?.[k]) untyped(s.properties[k], v, `${where}.${k}`, out);
    }
  }
}

/** Problems of one real response against the document: status, headers, body schema, untyped values. */
function problems(method: string, path: string, r: HarnessResponse): string[] {
  const tpl = templateOf(path);
  const op = doc.paths[tpl][method.toLowerCase()];
  const where = `${method} ${path} ${r.status}`;
  if (!op) return [`${where}: ${method} ${tpl} is not an operation of the document`];
  const documented = op.responses[String(r.status)];
  if (!documented) return [`${where}: status not documented (documented: ${Object.keys(op.responses).join(', ')})`];
  const out: string[] = [];
  const { node: response, at } = resolve(documented, ['paths', tpl, method.toLowerCase(), 'responses', String(r.status)]);
  for (const [name, header] of Object.entries<any>(response.headers ?? {})) {
    const h = resolve(header, []).node;
    const raw = r.headers[name.toLowerCase()];
    if (raw === undefined) {
      out.push(`${where}: header ${name} missing`);
      continue;
    }
    const value = h.schema.type === 'integer' && /^\d+$/.test(String(raw)) ? Number(raw) : String(raw);
    if (!ajv.validate(h.schema, value)) out.push(`${where}: header ${name}: ${JSON.stringify(raw)} ${ajv.errorsText()}`);
  }
  const media = response.content?.['application/json'];
  if (!media) {
    if (r.raw !== '') out.push(`${where}: a body where none is documented`);
    return out;
  }
  const ref = `doc#/${[...at, 'content', 'application/json', 'schema'].map(escape).join('/')}`;
  const validate = ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });
  if (!validate(r.body)) out.push(`${where}: body ${ajv.errorsText(validate.errors)}`);
  const schema = resolve(media.schema, []).node;
  // error.details is a free-form record (a rate-limit window's reset, a field's name).
  untyped(schema.properties?.error ? { ...schema, properties: { ...schema.properties, error: {} } } : schema, r.body, 'body', out);
  for (const p of out.splice(0)) out.push(p.startsWith(where) ? p : `${where}: ${p}`);
  return out;
}

describe('real responses match the OpenAPI document', () => {
  test('successes, conditional GETs and every kind of error: documented status, schema, headers, typed values', async () => {
    const found: string[] = [];
    const seen = new Set<string>();
    const call = async (method: string, path: string, opts: Parameters<Harness['request']>[2] = {}) => {
      const r = await h.request(method, path, opts);
      seen.add(`${method} ${templateOf(path)} ${r.status}`);
      found.push(...problems(method, path, r));
      return r;
    };

    const free = await h.keyFor('free');
    const pro = await h.keyFor('pro');
    const market = [
      '/api/v1/signals?include_factors=true',
      '/api/v1/signals/eth',
      '/api/v1/regime',
      '/api/v1/chain-health',
      '/api/v1/chain-health/sol',
      '/api/v1/chain-metrics/hype',
      '/api/v1/assets',
      '/api/v1/status',
      '/api/v1/prices/btc?days=30',
      '/api/v1/track-record',
      '/api/v1/signal-history/btc?days=365',
    ];
    for (const path of market) {
      const r = await call('GET', path, { token: pro.key });
      assert.equal(r.status, 200, `${path}: ${r.raw.slice(0, 200)}`);
      const etag = r.headers.etag;
      if (etag) assert.equal((await call('GET', path, { token: pro.key, headers: { 'if-none-match': String(etag) } })).status, 304);
    }
    await call('GET', '/api/v1/signals');
    await call('GET', '/api/v1/signal-history/btc', { token: free.key }); // 403
    await call('GET', '/api/v1/signal-history/btc'); // 401
    await call('GET', '/api/v1/signal-history/btc?end=2999-01-01', { token: pro.key }); // 400
    await call('GET', '/api/v1/signals/xyz', { token: pro.key }); // 404
    await call('GET', '/api/v1/signals?as_of=2025-01-01', { token: pro.key }); // 400
    await call('GET', '/api/v1/signals', { token: 'svc_live_bad' }); // 401
    const ip = h.freshIp();
    for (let i = 0; i < 6; i++) await call('GET', '/api/v1/regime', { ip }); // the 6th: 429

    // Keys (JWT): create, list, revoke, 404, 409.
    const created = await call('POST', '/api/v1/keys/create', { token: pro.jwt, body: { name: 'second' } });
    assert.equal(created.status, 201);
    await call('GET', '/api/v1/keys', { token: pro.jwt });
    await call('POST', '/api/v1/keys/revoke', { token: pro.jwt, body: { key_id: created.body.data.id } });
    await call('GET', '/api/v1/keys?limit=1', { token: pro.jwt });
    await call('POST', '/api/v1/keys/revoke', { token: pro.jwt, body: { key_id: '00000000-0000-4000-8000-000000000000' } });
    for (let i = 0; i < 5; i++) await call('POST', '/api/v1/keys/create', { token: free.jwt, body: { name: `k${i}` } }); // the 5th: 409
    await call('GET', '/api/v1/keys', { token: free.key }); // a key where a JWT is needed: 401

    // Theses (key): create, list with health, get, health, delete, 404, 400.
    const thesis = await call('POST', '/api/v1/thesis', {
      token: pro.key,
      body: {
        asset: 'eth',
        direction: 'long',
        title: 'ETH',
        entry_price: 4000,
        target_price: 5000,
        horizon_days: 30,
        conditions: [
          { id: 'rsi-weak', metric: 'rsi_14', operator: 'lt', value: 45 },
          { id: 'bear', metric: 'regime', operator: 'eq', value: 'bear', kind: 'invalidation' },
        ],
      },
    });
    assert.equal(thesis.status, 201, thesis.raw);
    const id = thesis.body.data.id as string;
    await call('GET', '/api/v1/thesis?include_health=true', { token: pro.key });
    await call('GET', `/api/v1/thesis/${id}`, { token: pro.key });
    await call('GET', `/api/v1/thesis/${id}/health`, { token: pro.jwt });
    await call('DELETE', `/api/v1/thesis/${id}`, { token: pro.key });
    await call('GET', `/api/v1/thesis/${id}`, { token: pro.key }); // 404
    await call('POST', '/api/v1/thesis', { token: pro.key, body: { asset: 'eth', direction: 'up', title: 'x' } }); // 400

    assert.deepEqual(found, [], found.join('\n'));
    for (const s of ['200', '201', '304', '400', '401', '403', '404', '409', '429'])
      assert.ok(
        [...seen].some((k) => k.endsWith(` ${s}`)),
        `no ${s} answer checked: ${[...seen].join(', ')}`,
      );
  });

  test('the defaults the parameter descriptions state are the schemas’ `default` and the ones the service applies', async () => {
    const pro = await h.keyFor('pro');
    const echoed: Record<string, (r: HarnessResponse) => unknown> = {
      'GET /api/v1/keys limit': (r) => r.body.data.limit,
      'GET /api/v1/thesis limit': (r) => r.body.data.limit,
      'GET /api/v1/signal-history/{asset} days': (r) => r.body.data.days,
      'GET /api/v1/signal-history/{asset} limit': (r) => r.body.data.limit,
      'GET /api/v1/prices/{asset} days': (r) => r.body.data.days,
    };
    const checked: string[] = [];
    for (const [tpl, item] of Object.entries<any>(doc.paths)) {
      for (const method of METHODS) {
        for (const p of item[method]?.parameters ?? []) {
          const param = resolve(p, []).node;
          const stated = /default (\d+)\)$/.exec(param.description ?? '')?.[1];
          if (stated === undefined) continue;
          const name = `${method.toUpperCase()} ${tpl} ${param.name}`;
          assert.equal(param.schema.default, Number(stated), `${name}: the description says default ${stated}`);
          const echo = echoed[name];
          assert.ok(echo, `${name}: no check of the default the service applies`);
          const r = await h.request(method.toUpperCase(), tpl.replace('{asset}', 'btc'), {
            token: tpl.includes('keys') ? pro.jwt : pro.key,
          });
          assert.equal(r.status, 200, r.raw);
          assert.equal(echo(r), param.schema.default, `${name}: applied default`);
          checked.push(name);
        }
      }
    }
    assert.deepEqual(checked.sort(), Object.keys(echoed).sort());
  });
});
