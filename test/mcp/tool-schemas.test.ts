import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import ajvFormats from 'ajv-formats';
import { z } from 'zod';
import { listEntry, singleTypeBranches } from '../../src/mcp/tool.ts';
import { TOOLS } from '../../src/mcp/tools/index.ts';

// The tool schemas are draft-7 (`$schema`: http://json-schema.org/draft-07/schema#), which
// Ajv's default class validates; formats as the MCP SDK's validator checks them (ajv-formats).
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Schema = Record<string, unknown>;

function newAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: false });
  (ajvFormats as unknown as (a: Ajv) => void)(ajv);
  return ajv;
}
const ajv = newAjv();
const compile = (s: unknown): ValidateFunction => ajv.compile(s as AnySchema);

/** Every `type` array in `node`'s subschemas (the rewrite must leave none). */
function typeArrays(node: unknown, out: unknown[] = []): unknown[] {
  if (Array.isArray(node)) node.forEach((x) => typeArrays(x, out));
  else if (node !== null && typeof node === 'object') {
    const o = node as Schema;
    if (Array.isArray(o.type)) out.push(o);
    for (const [k, v] of Object.entries(o)) if (!['default', 'examples', 'enum', 'const'].includes(k)) typeArrays(v, out);
  }
  return out;
}

/** Every `enum` and `const` value in a schema (probes for the enum edge cases). */
function listedValues(node: unknown, out: Json[] = []): Json[] {
  if (Array.isArray(node)) node.forEach((x) => listedValues(x, out));
  else if (node !== null && typeof node === 'object') {
    const o = node as Schema;
    if (Array.isArray(o.enum)) out.push(...(o.enum as Json[]));
    if ('const' in o) out.push(o.const as Json);
    for (const [k, v] of Object.entries(o)) if (k !== 'enum' && k !== 'const') listedValues(v, out);
  }
  return out;
}

/** Leaf values tried when building a valid instance, and as probes at every position. */
const SCALARS: Json[] = [
  null,
  true,
  false,
  0,
  1,
  -1,
  0.5,
  -0.25,
  42,
  1e20,
  -1e20,
  '',
  'a',
  'bitcoin',
  '2025-09-30',
  '2025-09-30T00:00:00.000Z',
  '00000000-0000-4000-8000-000000000000',
  'not-a-level',
];

/**
 * A value `schema` (the original, zod's) accepts, built from its properties, items and
 * branches; a leaf is the first listed value or scalar the leaf's schema accepts. Throws
 * when it finds none (the test then needs a new scalar).
 */
function instanceOf(schema: Schema): Json {
  if ('const' in schema) return schema.const as Json;
  if (Array.isArray(schema.enum)) return schema.enum[0] as Json;
  if (Array.isArray(schema.anyOf)) return instanceOf(schema.anyOf[0] as Schema);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'object') {
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) out[k] = instanceOf(v);
    return out;
  }
  if (type === 'array') return schema.items ? [instanceOf(schema.items as Schema)] : [];
  const ok = compile(schema);
  const found = SCALARS.find((v) => ok(v));
  if (found === undefined) throw new Error(`no sample value for ${JSON.stringify(schema)}`);
  return found;
}

/**
 * `doc` with the value at each position (the root, every property, every array item) replaced
 * by each probe in turn; with `shapes`, also each property left out, an undeclared one added,
 * and each array emptied and doubled.
 */
function* variants(doc: Json, probes: readonly Json[], shapes = true): Generator<Json> {
  yield* probes;
  if (Array.isArray(doc)) {
    for (let i = 0; i < doc.length; i++) for (const v of variants(doc[i]!, probes, shapes)) yield doc.map((x, j) => (j === i ? v : x));
    if (shapes) yield* [[], [...doc, ...doc]];
  } else if (doc !== null && typeof doc === 'object') {
    for (const k of Object.keys(doc)) {
      for (const v of variants(doc[k]!, probes, shapes)) yield { ...doc, [k]: v };
      const { [k]: _dropped, ...without } = doc;
      if (shapes) yield without;
    }
    if (shapes) yield { ...doc, undeclared: 1 };
  }
}

/** Runs `original` and `rewritten` on every variant; returns how many each accepted, failing on the first disagreement. */
function sameVerdicts(name: string, original: Schema, rewritten: Schema, extraProbes: readonly Json[] = []) {
  const before = compile(original);
  const after = compile(rewritten);
  const probes = [...new Set([...SCALARS, ...listedValues(original), ...extraProbes, [], {}].map((v) => JSON.stringify(v)))].map(
    (s) => JSON.parse(s) as Json,
  );
  let accepted = 0;
  let refused = 0;
  let acceptedNull = false;
  let refusedNull = false;
  const doc = instanceOf(original);
  assert.equal(before(doc), true, `${name}: the built instance is valid: ${JSON.stringify(before.errors)}`);
  for (const v of variants(doc, probes)) {
    const verdict = before(v);
    assert.equal(after(v), verdict, `${name}: the rewritten schema ${verdict ? 'refuses' : 'accepts'} ${JSON.stringify(v).slice(0, 400)}`);
    if (verdict) accepted++;
    else refused++;
  }
  // null at each position, on its own (a nullable field and a required non-null one).
  for (const v of variants(doc, [null], false)) {
    if (before(v)) acceptedNull = true;
    else refusedNull = true;
  }
  return { accepted, refused, acceptedNull, refusedNull };
}

test("every tool's input and output schema accepts and refuses the same values after the single-type rewrite", () => {
  let nullableSomewhere = false;
  for (const t of TOOLS) {
    const entry = listEntry(t);
    for (const [io, zodSchema, rewritten] of [
      ['input', t.input, entry.inputSchema],
      ['output', t.output, entry.outputSchema],
    ] as const) {
      const name = `${t.name} ${io}Schema`;
      const original = z.toJSONSchema(zodSchema, { target: 'draft-7', io }) as Schema;
      assert.equal(original.$schema, 'http://json-schema.org/draft-07/schema#', name);
      assert.deepEqual(typeArrays(rewritten), [], `${name}: one type per node`);
      const r = sameVerdicts(name, original, rewritten as Schema);
      assert.ok(r.accepted > 0 && r.refused > 0, `${name}: both verdicts were exercised (${r.accepted} accepted, ${r.refused} refused)`);
      assert.ok(r.refusedNull, `${name}: null is refused somewhere`);
      nullableSomewhere ||= r.acceptedNull;
    }
  }
  // The outputs hold nullable fields (change_24h_pct, stale_reason, ...): null accepted there.
  assert.ok(nullableSomewhere, 'some tool schema accepts null at some position');
});

test('a type array with enum, const, not or a number bound keeps accepting exactly the same values', () => {
  const cases: [string, Schema, Schema][] = [
    // The case that once accepted null: enum lists no null.
    ['nullable enum without null', { type: ['string', 'null'], enum: ['a', 'b'] }, { type: 'string', enum: ['a', 'b'] }],
    [
      'nullable enum with null',
      { type: ['string', 'null'], enum: ['a', null] },
      {
        anyOf: [
          { type: 'string', enum: ['a'] },
          { type: 'null', enum: [null] },
        ],
      },
    ],
    [
      'mixed enum, integer and string',
      { type: ['integer', 'string'], enum: [1, 2.5, 'x', null] },
      {
        anyOf: [
          { type: 'integer', enum: [1] },
          { type: 'string', enum: ['x'] },
        ],
      },
    ],
    ['const of one type', { type: ['number', 'null'], const: 3 }, { type: 'number', const: 3 }],
    [
      'not and a bound',
      { type: ['number', 'null'], minimum: 0, not: { const: 5 }, description: 'd' },
      {
        description: 'd',
        anyOf: [
          { type: 'number', minimum: 0, not: { const: 5 } },
          { type: 'null', not: { const: 5 } },
        ],
      },
    ],
    [
      'nested in items and properties',
      {
        type: 'object',
        properties: { xs: { type: 'array', items: { type: ['string', 'null'], enum: ['p', 'q'], maxLength: 1 } } },
        additionalProperties: { type: ['boolean', 'null'] },
      },
      {
        type: 'object',
        properties: { xs: { type: 'array', items: { type: 'string', enum: ['p', 'q'], maxLength: 1 } } },
        additionalProperties: { anyOf: [{ type: 'boolean' }, { type: 'null' }] },
      },
    ],
  ];
  for (const [name, schema, expected] of cases) {
    const rewritten = structuredClone(schema);
    singleTypeBranches(rewritten);
    assert.deepEqual(rewritten, expected, name);
    const before = compile(schema);
    const after = compile(rewritten);
    for (const v of [...SCALARS, 2.5, 3, 5, 'p', 'q', 'pq', 'x', 'b', { xs: ['p', null] }, { xs: ['q'], y: null }, { y: 'no' }, [null]])
      assert.equal(after(v), before(v), `${name}: ${JSON.stringify(v)}`);
  }
  assert.equal(compile({ type: 'string', enum: ['a', 'b'] })(null), false, 'the enum case refuses null');
});

test('values are not visited: default, examples, enum and const keep a "type" array they hold', () => {
  const value = { type: ['x', 'y'], nested: [{ type: ['p', 'q'] }] };
  const schema: Schema = {
    type: 'object',
    properties: {
      a: { type: ['object', 'null'], default: value, examples: [value] },
      b: { enum: [value, 1] },
      c: { const: value },
    },
  };
  singleTypeBranches(schema);
  const props = schema.properties as Record<string, Schema>;
  assert.deepEqual(props.a, { default: value, examples: [value], anyOf: [{ type: 'object' }, { type: 'null' }] });
  assert.deepEqual(props.b, { enum: [value, 1] });
  assert.deepEqual(props.c, { const: value });
  // A $defs entry is a schema (visited), and stays on its node for $ref paths.
  const withDefs: Schema = {
    type: ['object', 'null'],
    $defs: { n: { type: ['number', 'null'] } },
    properties: { v: { $ref: '#/$defs/n' } },
  };
  singleTypeBranches(withDefs);
  assert.deepEqual(withDefs, {
    $defs: { n: { anyOf: [{ type: 'number' }, { type: 'null' }] } },
    anyOf: [{ type: 'object', properties: { v: { $ref: '#/$defs/n' } } }, { type: 'null' }],
  });
  assert.equal(compile(withDefs)({ v: 'no' }), false);
  assert.equal(compile(withDefs)({ v: null }), true);
});
