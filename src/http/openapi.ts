import type { SwaggerTransformObject } from '@fastify/swagger';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { globalRegistry, z } from 'zod';
import { TIERS } from '../auth/tiers.ts';
import { ERROR_STATUS, type ErrorCode } from '../errors.ts';
import type { Operation } from '../services/operation.ts';
import { cacheable } from './caching.ts';
import { ChainId, RegimeLevel, SignalLevel, TierSchema } from '../services/schemas/common.ts';
import {
  CreatedKeySchema,
  CreateKeyInput,
  KeyListSchema,
  KeyViewSchema,
  RevokedKeySchema,
  RevokeKeyInput,
} from '../services/schemas/keys.ts';
import {
  AssetEntrySchema,
  AssetsDataSchema,
  ChainHealthListSchema,
  ChainHealthSchema,
  ChainMetricsSchema,
  FactorSchema,
  HistoryDataSchema,
  HistoryEntrySchema,
  LevelRuleSchema,
  MissingFactorSchema,
  RegimeDataSchema,
  SignalEntrySchema,
  SignalsDataSchema,
} from '../services/schemas/market.ts';
import {
  ConditionInputSchema,
  ConditionSchema,
  DeletedThesisSchema,
  MAX_THESES,
  ThesisHealthSchema,
  ThesisInputSchema,
  ThesisListSchema,
  ThesisSchema,
} from '../services/schemas/theses.ts';
import {
  AssetWindowMetricsSchema,
  BacktestReportSchema,
  TrackRecordSchema,
  WindowMetricsSchema,
} from '../services/schemas/track-record.ts';
import { ErrorEnvelopeSchema, MetaSchema, okEnvelope } from './envelope.ts';
import { EXAMPLE_META, ERROR_EXAMPLES, HEADER_EXAMPLES, SUCCESS_EXAMPLES } from './openapi-examples.ts';

/**
 * How the OpenAPI document (GET /api/v1/openapi.json) is made usable by client generators
 * (docs/openapi.md): the main zod schemas are named components (`#/components/schemas/...`)
 * instead of being repeated inline, every error status is a shared response
 * (`#/components/responses/...`) with a description, the envelope schema, an example and its
 * headers, and every success response has a description, its headers and a real example.
 * Only the document changes: validation and the responses themselves are untouched.
 */

type SchemaMeta = { id?: string; [k: string]: unknown };

/**
 * Metadata lookups that fall back to zod's global registry, so the `.describe()` and `.meta()`
 * of the schemas (kept in the global registry) still reach the document. The component ids
 * live in a registry of their own, not the global one: the MCP tools' JSON schemas (built by
 * the SDK from the global registry) stay inline, as before.
 */
class GlobalFallbackMap extends WeakMap<object, SchemaMeta> {
  override get(key: object): SchemaMeta | undefined {
    return super.get(key) ?? (globalRegistry._map.get(key as never) as SchemaMeta | undefined);
  }
  override has(key: object): boolean {
    return super.has(key) || globalRegistry._map.has(key as never);
  }
}

/** The named component schemas of the document. Input uses get the suffix `Input` (fastify-type-provider-zod). */
export const componentRegistry = z.registry<SchemaMeta>();
(componentRegistry as unknown as { _map: WeakMap<object, SchemaMeta> })._map = new GlobalFallbackMap();

function component(schema: z.ZodType, id: string): void {
  componentRegistry.add(schema, { ...(globalRegistry.get(schema) as SchemaMeta | undefined), id });
}

const COMPONENTS: [z.ZodType, string][] = [
  [MetaSchema, 'Meta'],
  [ErrorEnvelopeSchema, 'ErrorEnvelope'],
  [ErrorEnvelopeSchema.shape.error, 'Error'],
  [SignalLevel, 'SignalLevel'],
  [RegimeLevel, 'RegimeLevel'],
  [ChainId, 'ChainId'],
  [TierSchema, 'Tier'],
  [FactorSchema, 'Factor'],
  [MissingFactorSchema, 'MissingFactor'],
  [LevelRuleSchema, 'LevelRule'],
  [SignalEntrySchema, 'SignalEntry'],
  [SignalsDataSchema, 'Signals'],
  [RegimeDataSchema, 'Regime'],
  [ChainHealthSchema, 'ChainHealth'],
  [ChainHealthListSchema, 'ChainHealthList'],
  [ChainMetricsSchema, 'ChainMetrics'],
  [AssetEntrySchema, 'AssetEntry'],
  [AssetsDataSchema, 'Assets'],
  [HistoryEntrySchema, 'HistoryEntry'],
  [HistoryDataSchema, 'SignalHistory'],
  [WindowMetricsSchema, 'WindowMetrics'],
  [AssetWindowMetricsSchema, 'AssetWindowMetrics'],
  [BacktestReportSchema, 'BacktestReport'],
  [TrackRecordSchema, 'TrackRecord'],
  // Request bodies (input only, hence named `CreateKeyInput`, `RevokeKeyInput`, `NewThesisInput`, `NewConditionInput`).
  [CreateKeyInput, 'CreateKey'],
  [RevokeKeyInput, 'RevokeKey'],
  [ThesisInputSchema, 'NewThesis'],
  [ConditionInputSchema, 'NewCondition'],
  [CreatedKeySchema, 'CreatedKey'],
  [KeyViewSchema, 'KeyView'],
  [KeyListSchema, 'KeyList'],
  [RevokedKeySchema, 'RevokedKey'],
  [ConditionSchema, 'Condition'],
  [ThesisSchema, 'Thesis'],
  [ThesisListSchema, 'ThesisList'],
  [ThesisHealthSchema, 'ThesisHealth'],
  [DeletedThesisSchema, 'DeletedThesis'],
];
for (const [schema, id] of COMPONENTS) component(schema, id);

const envelopes = new WeakMap<Operation, z.ZodType>();

/** The success envelope of an operation, named `<OperationId>Response` in the document (one schema per operation). */
export function successEnvelope(op: Operation): z.ZodType {
  let s = envelopes.get(op);
  if (!s) {
    s = okEnvelope(op.output);
    component(s, `${op.name[0]!.toUpperCase()}${op.name.slice(1)}Response`);
    envelopes.set(op, s);
  }
  return s;
}

const zodTransform = createJsonSchemaTransform({ schemaRegistry: componentRegistry });
/** `METHOD /path/{param}` of the routes whose body may be left out (@fastify/swagger marks every body required). */
const optionalBodies = new Set<string>();

/** Route schema transform: zod to JSON Schema, registered schemas as `$ref` (fastify-type-provider-zod). */
export const openApiTransform: typeof zodTransform = (document) => {
  const body = (document.schema as { body?: unknown } | undefined)?.body;
  if (body instanceof z.ZodType && body.safeParse(undefined).success) {
    for (const m of [document.route.method].flat()) optionalBodies.add(`${m.toLowerCase()} ${document.url.replace(/:(\w+)/g, '{$1}')}`);
  }
  const out = zodTransform(document);
  restoreQueryDefaults(
    (document.schema as { querystring?: unknown } | undefined)?.querystring,
    (out.schema as Json | undefined)?.querystring,
  );
  return out;
};

/**
 * Puts back the `default` of each query parameter whose schema declares one (`boundedInt`'s
 * `.meta({default})` in src/http/routes/v1.ts): zod's toJSONSchema drops `default` from the
 * input side of a schema that transforms (the string `"30"` becomes the number 30), so the
 * parameter was documented without it and a generated client could not know it
 * (docs/openapi.md).
 */
function restoreQueryDefaults(zodQuery: unknown, jsonQuery: Json | undefined): void {
  if (!(zodQuery instanceof z.ZodObject) || !jsonQuery?.properties) return;
  for (const [name, schema] of Object.entries(zodQuery.shape as Record<string, z.ZodType>)) {
    const dflt = (globalRegistry.get(schema) as SchemaMeta | undefined)?.default;
    const prop = jsonQuery.properties[name] as Json | undefined;
    if (dflt !== undefined && prop && !('$ref' in prop) && !('default' in prop)) prop.default = dflt;
  }
}

type Json = Record<string, any>;
const ref = (kind: 'schemas' | 'responses' | 'headers' | 'parameters', name: string) => ({ $ref: `#/components/${kind}/${name}` });

/** Response headers (components.headers). */
const HEADERS: Record<string, Json> = {
  'X-Request-Id': {
    description: 'Id of this request (UUID), also in `meta.request_id`; quote it when reporting a problem',
    required: true,
    schema: { type: 'string', format: 'uuid' },
    example: EXAMPLE_META.request_id,
  },
  'X-RateLimit-Limit': {
    description: "Requests allowed per UTC day in the caller's tier (per minute for a tier without a daily limit)",
    schema: { type: 'integer', minimum: 0 },
    example: Number(HEADER_EXAMPLES['x-ratelimit-limit']),
  },
  'X-RateLimit-Remaining': {
    description: 'Requests left in that window',
    schema: { type: 'integer', minimum: 0 },
    example: Number(HEADER_EXAMPLES['x-ratelimit-remaining']),
  },
  'X-RateLimit-Reset': {
    description: 'When that window resets, ISO 8601 UTC (next UTC midnight for the daily window)',
    schema: { type: 'string', format: 'date-time' },
    example: HEADER_EXAMPLES['x-ratelimit-reset'],
  },
  'X-Service-Tier': {
    description: 'The tier the request was counted in',
    schema: { type: 'string', enum: [...TIERS] },
    example: HEADER_EXAMPLES['x-service-tier'],
  },
  'RateLimit-Policy': {
    description: 'The quota policies of the tier, per window (IETF draft-ietf-httpapi-ratelimit-headers): `q` requests per `w` seconds',
    schema: { type: 'string' },
    example: HEADER_EXAMPLES['ratelimit-policy'],
  },
  RateLimit: {
    description: 'What is left of each window (IETF draft-ietf-httpapi-ratelimit-headers): `r` remaining requests, reset in `t` seconds',
    schema: { type: 'string' },
    example: HEADER_EXAMPLES.ratelimit,
  },
  'Retry-After': {
    description: 'Seconds to wait before the next request is accepted',
    required: true,
    schema: { type: 'integer', minimum: 1 },
    example: Number(HEADER_EXAMPLES['retry-after']),
  },
  'Retry-After-Unavailable': {
    description:
      'Seconds to wait before trying again (also `error.details.retry_after`), when the 503 is a passing failure (a dependency down: 5 s; the track record not computed: 60 s); absent when it is a state of the data (a thesis whose asset has no current signal)',
    schema: { type: 'integer', minimum: 1 },
    example: 5,
  },
  'Cache-Control': {
    description:
      'Market data: `public` (no credentials) or `private` (keyed, and the signal history), `max-age` until the next 00:00 UTC (at least 60 s; 300 s in live mode), with `Vary: Authorization, accept-encoding`; keys, theses and /status: `no-store`',
    required: true,
    schema: { type: 'string' },
    example: 'public, max-age=3600',
  },
  ETag: {
    description:
      'Weak entity tag of the data (a SHA-1 of the as-of day and the data: it changes with either); send it back as `If-None-Match` to get a 304',
    required: true,
    schema: { type: 'string' },
    example: 'W/"n4bQgYhMfWWaL-qgxVrQFaO_TdI"',
  },
  'WWW-Authenticate': {
    description:
      'Bearer challenge (RFC 6750): `Bearer realm="api"` without credentials, with `error="invalid_token"` and the reason otherwise',
    required: true,
    schema: { type: 'string' },
    example:
      'Bearer realm="api", error="invalid_token", error_description="Invalid API key svc_live_not-...: malformed (a key is svc_live_ followed by 38 letters and digits); copy it again from where you created it, or create one at /signin"',
  },
};

/** The headers of every /api/v1 response: the request id and the rate-limit state. */
const COMMON_HEADERS = [
  'X-Request-Id',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'X-Service-Tier',
  'RateLimit-Policy',
  'RateLimit',
];

/**
 * One shared response per error code: its component name, description and extra headers
 * (header name -> its component in HEADERS, which is the header's own name unless the same
 * header means something else here). An operation refers to the one of the code it declares
 * for a status (two codes share 409).
 */
const ERROR_RESPONSES: Record<ErrorCode, { name: string; description: string; headers?: Record<string, string> }> = {
  INVALID_PARAMETER: {
    name: 'InvalidParameter',
    description:
      'INVALID_PARAMETER: a path parameter, query parameter or body field is invalid, a query parameter is not one the operation takes, a credential is sent in the query string or (without Authorization) in an X-API-Key, Api-Key, ApiKey or X-Auth-Token header, or the body is not JSON; `error.details` names the location and the field',
  },
  UNAUTHORIZED: {
    name: 'Unauthorized',
    description:
      'UNAUTHORIZED: no, malformed, unknown or revoked API key (or a missing, invalid or expired JWT where a signed-in user is required); see WWW-Authenticate',
    headers: { 'WWW-Authenticate': 'WWW-Authenticate' },
  },
  TIER_REQUIRED: {
    name: 'TierRequired',
    description:
      "TIER_REQUIRED: the caller's tier may not use this operation; `error.details` lists the required tiers and the caller's tier",
  },
  NOT_FOUND: {
    name: 'NotFound',
    description: "NOT_FOUND: unknown asset or chain, or a key or thesis that does not exist or is not the caller's",
  },
  KEY_LIMIT_REACHED: {
    name: 'KeyLimitReached',
    description: 'KEY_LIMIT_REACHED: the user already has the maximum number of active API keys (5); revoke one first',
  },
  THESIS_LIMIT_REACHED: {
    name: 'ThesisLimitReached',
    description: `THESIS_LIMIT_REACHED: the user already has the maximum number of theses (${MAX_THESES}); delete one first`,
  },
  RATE_LIMITED: {
    name: 'RateLimited',
    description:
      "RATE_LIMITED: the tier's per-minute or per-day quota, or the client address's budget of 20 failed authentications per minute, is used up; retry after `Retry-After` seconds (`error.details` has the window, the limit, the reset time and `scope`: `key`, `jwt` or `address` for the caller's own quota, `account` for the account ceiling of all the user's keys together, `address` for the failed-authentication budget)",
    headers: { 'Retry-After': 'Retry-After' },
  },
  INTERNAL_ERROR: {
    name: 'InternalError',
    description: 'INTERNAL_ERROR: an unexpected failure of the service (no internals disclosed); quote X-Request-Id when reporting it',
  },
  SERVICE_UNAVAILABLE: {
    name: 'ServiceUnavailable',
    description:
      'SERVICE_UNAVAILABLE: a dependency (the database, the identity provider) cannot be reached, or the track record could not be computed: retry after `Retry-After` seconds (`error.details.retry_after`); or the data an answer needs is not current (a thesis whose asset has no current signal: the message says why, GET /api/v1/status shows each series; no `Retry-After`)',
    headers: { 'Retry-After': 'Retry-After-Unavailable' },
  },
};

const CODE_OF_STATUS = new Map<number, ErrorCode>(Object.entries(ERROR_STATUS).map(([code, status]) => [status, code as ErrorCode]));

/** A response's `headers`: header name -> reference to its component (the same name unless `components` says otherwise). */
function headerRefs(names: string[], components: Record<string, string> = {}): Json {
  return Object.fromEntries(names.map((h) => [h, ref('headers', components[h] ?? h)]));
}

function errorResponse(code: ErrorCode): Json {
  const r = ERROR_RESPONSES[code];
  return {
    description: r.description,
    headers: headerRefs([...COMMON_HEADERS, ...Object.keys(r.headers ?? {})], r.headers),
    content: {
      'application/json': {
        schema: ref('schemas', 'ErrorEnvelope'),
        example: { status: 'error', data: null, error: ERROR_EXAMPLES[code], meta: EXAMPLE_META },
      },
    },
  };
}

/** A summary's first letter in lower case, to continue a sentence; an acronym (`BTC market regime`) is kept. */
const lowerFirst = (text: string): string => (/^[A-Z][A-Z]/.test(text) ? text : text.charAt(0).toLowerCase() + text.slice(1));

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every `$ref` string under `node`. */
function refsIn(node: unknown, out: Set<string>): Set<string> {
  if (Array.isArray(node)) for (const x of node) refsIn(x, out);
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.add(v);
      else refsIn(v, out);
    }
  }
  return out;
}

/** Removes the component schemas nothing refers to (e.g. the input copy of an output-only schema). */
function pruneSchemas(doc: Json): void {
  const schemas: Json = doc.components?.schemas ?? {};
  const prefix = '#/components/schemas/';
  const { schemas: _omit, ...restComponents } = doc.components ?? {};
  const pending = [...refsIn({ ...doc, components: restComponents }, new Set())];
  const used = new Set<string>();
  while (pending.length > 0) {
    const r = pending.pop()!;
    if (!r.startsWith(prefix)) continue;
    const name = r.slice(prefix.length);
    if (used.has(name) || !schemas[name]) continue;
    used.add(name);
    pending.push(...refsIn(schemas[name], new Set()));
  }
  for (const name of Object.keys(schemas)) if (!used.has(name)) delete schemas[name];
}

/**
 * Finishes the document (the swagger `transformObject` hook): named component schemas, the
 * shared error responses and headers, success descriptions, headers and examples; component
 * schemas nothing uses are dropped.
 */
export function finishDocument(doc: Json, operations: readonly Operation[]): Json {
  const byName = new Map(operations.map((op) => [op.name, op]));
  doc.components = { ...doc.components, headers: HEADERS, responses: {} };
  for (const [path, item] of Object.entries<Json>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op: Json | undefined = item[method];
      if (!op?.responses) continue;
      const known = byName.get(op.operationId);
      if (op.requestBody && optionalBodies.has(`${method} ${path}`)) op.requestBody.required = false;
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        // The operation's own code of that status (two codes share 409); else the status's.
        const code = known?.errors?.find((c) => ERROR_STATUS[c] === Number(status)) ?? CODE_OF_STATUS.get(Number(status));
        if (code) {
          doc.components.responses[ERROR_RESPONSES[code].name] ??= errorResponse(code);
          op.responses[status] = ref('responses', ERROR_RESPONSES[code].name);
        } else if (known && Number(status) < 300) {
          response.description = `${status === '201' ? 'Created' : 'OK'}: ${lowerFirst(known.summary)}, in the envelope \`{status: "ok", data, meta}\``;
          const revalidated = method === 'get' && cacheable(known);
          response.headers = headerRefs([...COMMON_HEADERS, 'Cache-Control', ...(revalidated ? ['ETag'] : [])]);
          const media = response.content?.['application/json'];
          if (media && SUCCESS_EXAMPLES[known.name] !== undefined)
            media.example = { status: 'ok', data: SUCCESS_EXAMPLES[known.name], meta: EXAMPLE_META };
          if (revalidated) {
            // Conditional GET (RFC 9110 section 13.1.2): a matching If-None-Match gets 304, no body.
            op.parameters = [...(op.parameters ?? []), ref('parameters', 'IfNoneMatch')];
            op.responses['304'] = ref('responses', 'NotModified');
          }
        }
      }
    }
  }
  // Order the shared responses by status.
  doc.components.responses = Object.fromEntries(
    Object.entries(ERROR_RESPONSES)
      .filter(([, r]) => doc.components.responses[r.name])
      .map(([, r]) => [r.name, doc.components.responses[r.name]]),
  );
  // Conditional GET (above), shared by the market-data operations.
  doc.components.responses.NotModified = {
    description: 'Not Modified: the data still has the ETag sent in If-None-Match; no body (it counts against the quota like a 200)',
    headers: headerRefs([...COMMON_HEADERS, 'Cache-Control', 'ETag']),
  };
  doc.components.parameters = {
    ...doc.components.parameters,
    IfNoneMatch: {
      name: 'If-None-Match',
      in: 'header',
      required: false,
      description: 'The ETag of an earlier answer: when the data has not changed, the answer is 304 Not Modified without a body',
      schema: { type: 'string' },
    },
  };
  pruneSchemas(doc);
  return doc;
}

/** The swagger `transformObject` hook: zod components first (fastify-type-provider-zod), then {@link finishDocument}. */
export function openApiTransformObject(operations: readonly Operation[]): SwaggerTransformObject {
  const base = createJsonSchemaTransformObject({ schemaRegistry: componentRegistry });
  return (documentObject) => finishDocument(base(documentObject) as Json, operations) as ReturnType<SwaggerTransformObject>;
}
