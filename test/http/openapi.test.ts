import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT_DIR } from '../../src/config.ts';
import { ERROR_CODES, ERROR_STATUS } from '../../src/errors.ts';
import { errorCodesOf } from '../../src/http/route.ts';
import { OPERATIONS } from '../../src/services/operations/index.ts';
import { SUCCESS_EXAMPLES } from '../../src/http/openapi-examples.ts';
import { keyFormatError } from '../../src/auth/api-keys.ts';
import { readFileSync } from 'node:fs';
import { createService, type Service } from '../../src/server.ts';
import { testConfig } from '../helpers/env.ts';

/**
 * The served OpenAPI document is one a client generator can use (docs/openapi.md): it passes
 * `redocly lint` (recommended rules) with no error and no warning but the justified ones, every
 * operation has a unique operationId, declared tags, 429 with Retry-After and 503, and the
 * shared schemas are components (the document stays small).
 */

/** Warnings docs/openapi.md justifies ("Lint"). */
const JUSTIFIED_WARNINGS = new Set(['info-license']);
/**
 * Size bound of the document: 149 KB of inline schemas before components, ~69 KB after (with
 * examples); ~88 KB with GET /track-record (its metrics schemas are components, referenced);
 * ~100 KB with GET /status and GET /prices (19 operations, each with every error response);
 * ~113 KB with conditional GET (Cache-Control and ETag headers, a shared 304 and If-None-Match)
 * and the signal history's paging fields; ~122 KB with the track record's by-year view (its
 * schema and a year's example); ~125 KB with formats on every timestamp, day and id, query
 * defaults and the thesis-health example's full components. Inlined schemas would be well
 * above this bound.
 */
const MAX_BYTES = 135_000;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

let svc: Service;
let raw = '';
let doc: any;
let dir = '';

before(async () => {
  svc = await createService(testConfig());
  await svc.app.ready();
  const res = await svc.app.inject({ method: 'GET', url: '/api/v1/openapi.json', remoteAddress: '10.77.0.1' });
  assert.equal(res.statusCode, 200);
  raw = res.body;
  doc = JSON.parse(raw);
  dir = mkdtempSync(path.join(tmpdir(), 'openapi-lint-'));
});
after(async () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  await svc?.stop();
});

/** Every operation of the document with its path and method. */
function operations(): { where: string; op: any }[] {
  const out: { where: string; op: any }[] = [];
  for (const [p, item] of Object.entries<any>(doc.paths)) {
    for (const m of METHODS) if (item[m]) out.push({ where: `${m.toUpperCase()} ${p}`, op: item[m] });
  }
  return out;
}

/** Resolves a local `$ref` (`#/components/...`). */
function deref(node: any): any {
  let n = node;
  for (let i = 0; n?.$ref && i < 5; i++) {
    n = (n.$ref as string)
      .replace(/^#\//, '')
      .split('/')
      .reduce((o: any, k: string) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return n;
}

describe('OpenAPI document', () => {
  test('passes redocly lint (recommended rules) with no errors and only justified warnings', async () => {
    const bin = path.join(ROOT_DIR, 'node_modules', '.bin', process.platform === 'win32' ? 'redocly.cmd' : 'redocly');
    assert.ok(existsSync(bin), `${bin} missing: run npm install (@redocly/cli is a devDependency)`);
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, raw);
    let stdout: string;
    try {
      ({ stdout } = await promisify(execFile)(bin, ['lint', file, '--format=json'], {
        cwd: dir,
        timeout: 120_000,
        maxBuffer: 16 * 1024 * 1024,
        // No telemetry, no update check: the lint works offline.
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      }));
    } catch (err) {
      // redocly exits 1 when it finds errors; its report is still on stdout.
      stdout = (err as { stdout?: string }).stdout ?? '';
      if (!stdout.trim().startsWith('{')) throw err;
    }
    const report = JSON.parse(stdout) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; severity: string; message: string }[];
    };
    const unexpected = report.problems.filter((p) => p.severity === 'error' || !JUSTIFIED_WARNINGS.has(p.ruleId));
    assert.deepEqual(unexpected, [], JSON.stringify(unexpected, null, 2));
    assert.equal(report.totals.errors, 0);
  });

  test('every operation has a unique operationId and declared tags', () => {
    const declared = new Set((doc.tags as { name: string }[]).map((t) => t.name));
    const ids = new Set<string>();
    const ops = operations();
    assert.ok(ops.length >= 16, `only ${ops.length} operations`);
    for (const { where, op } of ops) {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z]+$/, `${where}: operationId`);
      assert.ok(!ids.has(op.operationId), `${where}: duplicate operationId ${op.operationId}`);
      ids.add(op.operationId);
      assert.ok(op.tags?.length > 0, `${where}: no tag`);
      for (const t of op.tags) assert.ok(declared.has(t), `${where}: tag ${t} not declared`);
    }
  });

  test('every operation documents 429 with Retry-After, 503, 500, and every response its headers and a description', () => {
    for (const { where, op } of operations()) {
      for (const status of ['429', '503', '500']) assert.ok(op.responses[status], `${where}: no ${status}`);
      assert.ok(deref(deref(op.responses['429']).headers?.['Retry-After'])?.schema, `${where}: 429 without Retry-After`);
      // A 503 names a wait only when it will pass (errors.ts `unavailable`): documented, not required.
      const wait503 = deref(deref(op.responses['503']).headers?.['Retry-After']);
      assert.equal(wait503?.schema?.type, 'integer', `${where}: 503 without Retry-After`);
      assert.notEqual(wait503.required, true, `${where}: a 503's Retry-After is not always sent`);
      if (op.responses['401'])
        assert.ok(deref(op.responses['401']).headers?.['WWW-Authenticate'], `${where}: 401 without WWW-Authenticate`);
      for (const [status, r] of Object.entries<any>(op.responses)) {
        const res = deref(r);
        assert.ok(
          res.description && res.description !== 'Default Response' && res.description.length > 20,
          `${where} ${status}: description`,
        );
        for (const h of [
          'X-Request-Id',
          'X-RateLimit-Limit',
          'X-RateLimit-Remaining',
          'X-RateLimit-Reset',
          'X-Service-Tier',
          'RateLimit-Policy',
          'RateLimit',
        ]) {
          assert.ok(deref(res.headers?.[h])?.schema, `${where} ${status}: header ${h}`);
        }
        if (status === '304') {
          // Not Modified has no body (RFC 9110 section 15.4.5), but says which ETag still holds.
          assert.equal(res.content, undefined, `${where} 304: no body`);
          assert.ok(deref(res.headers?.ETag)?.schema, `${where} 304: header ETag`);
          continue;
        }
        const media = res.content?.['application/json'];
        assert.ok(media?.schema, `${where} ${status}: no JSON schema`);
        assert.ok(media.example ?? media.examples, `${where} ${status}: no example`);
        if (Number(status) >= 400)
          assert.equal(
            media.example.error.code,
            ERROR_CODES.find((c) => res.description.startsWith(`${c}:`)),
            `${where} ${status}`,
          );
      }
    }
  });

  test("each operation's error responses are the codes it answers, by status (KEY_LIMIT_REACHED and THESIS_LIMIT_REACHED share 409)", () => {
    const byName = new Map(OPERATIONS.map((o) => [o.name, o]));
    for (const { where, op } of operations()) {
      const known = byName.get(op.operationId);
      assert.ok(known, `${where}: operation ${op.operationId}`);
      const documented = Object.entries<any>(op.responses)
        .filter(([status]) => Number(status) >= 400)
        .map(([status, r]) => `${status} ${deref(r).content['application/json'].example.error.code}`);
      assert.deepEqual(
        documented,
        errorCodesOf(known).map((c) => `${ERROR_STATUS[c]} ${c}`),
        where,
      );
    }
  });

  test("a success response's description continues the summary without breaking an acronym (BTC, not bTC)", () => {
    assert.match(deref(doc.paths['/api/v1/regime'].get.responses['200']).description, /^OK: BTC market regime, /);
    assert.match(deref(doc.paths['/api/v1/signals'].get.responses['200']).description, /^OK: signals of all assets, /);
  });

  test('error.code is the closed enum and the main schemas are shared components', () => {
    const error = deref(deref(doc.components.schemas.ErrorEnvelope).properties.error);
    assert.deepEqual(error.properties.code.enum, ERROR_CODES);
    for (const name of [
      'ErrorEnvelope',
      'Meta',
      'SignalEntry',
      'Factor',
      'Regime',
      'ChainHealth',
      'ChainMetrics',
      'AssetEntry',
      'SignalHistory',
      'Thesis',
      'ThesisHealth',
      'KeyView',
      'TrackRecord',
      'BacktestReport',
      'WindowMetrics',
    ]) {
      assert.ok(doc.components.schemas[name], `components.schemas.${name}`);
    }
    // SignalEntry is defined once and referenced, not repeated inline.
    assert.equal(raw.split('"Canonical (CoinGecko) asset id"').length - 1, 1);
  });

  test('example keys (OpenAPI, README) fail the checksum: no secret scanner or reader takes one for a real key', () => {
    const readme = readFileSync(path.join(ROOT_DIR, 'README.md'), 'utf8');
    const keys = [(SUCCESS_EXAMPLES.createKey as { key: string }).key, ...(readme.match(/svc_live_[A-Za-z0-9]{38}\b/g) ?? [])];
    assert.ok(keys.length >= 2);
    for (const k of keys) assert.equal(keyFormatError(k), 'bad_checksum', k);
  });

  test('the signal-history example is point-in-time: no factor names data after its entry day', () => {
    const ex = SUCCESS_EXAMPLES.getSignalHistory as { entries: { changed_at: string; factors: { as_of: string; source: string }[] }[] };
    for (const e of ex.entries)
      for (const f of e.factors) {
        assert.ok(f.as_of <= e.changed_at, f.as_of);
        for (const [, end] of f.source.matchAll(/\d{4}-\d{2}-\d{2}\.\.(\d{4}-\d{2}-\d{2})/g)) assert.ok(end! <= e.changed_at, f.source);
      }
  });

  test('the thesis-health example adds up: its averaged components weigh 1 in all and reproduce health_score (docs/methodology.md, "Thesis health")', () => {
    const ex = SUCCESS_EXAMPLES.getThesisHealth as { health_score: number; components: { name: string; score: number; weight: number }[] };
    const averaged = ex.components.filter((c) => c.name !== 'warnings');
    assert.ok(Math.abs(averaged.reduce((a, c) => a + c.weight, 0) - 1) < 1e-3, JSON.stringify(ex.components));
    const kept = ex.components.find((c) => c.name === 'warnings')?.score ?? 100;
    const score = (averaged.reduce((a, c) => a + c.weight * c.score, 0) * kept) / 100;
    assert.ok(Math.abs(score - ex.health_score) <= 0.1, `${score} vs ${ex.health_score}`);
  });

  test(`is smaller than ${MAX_BYTES} bytes`, () => {
    assert.ok(raw.length < MAX_BYTES, `${raw.length} bytes`);
  });
});
