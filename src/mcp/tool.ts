import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { type ErrorCode, fieldMessage, ServiceError, loggableError, reworded, unexpectedError } from '../errors.ts';
import type { LimitDecision } from '../rate-limit/limiter.ts';
import type { Access, Caller, Policy } from '../services/access.ts';
import { daysBetween } from '../engine/util.ts';
import type { Operation, Services } from '../services/operation.ts';
import { closedObject } from '../services/schemas/common.ts';

/** The names of the six MCP tools (README, "MCP"). */
export const TOOL_NAMES = [
  'get_signals',
  'get_market_regime',
  'get_chain_health',
  'get_thesis_health',
  'get_assets',
  'get_signal_history',
] as const;
/** One of the six tool names. */
export type ToolName = (typeof TOOL_NAMES)[number];

/** Every tool is read-only, idempotent and answers from this service's own data. */
export const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

/**
 * An MCP tool: title, description and text summary around one or two operations
 * (services/operations), which define who may call it and what it answers
 * (docs/architecture.md, "How to add"). `structuredContent` is the operation's output,
 * equal to the REST `data` of the same question.
 */
export interface ToolDefinition<A extends z.ZodObject = z.ZodObject, D = unknown> {
  name: ToolName;
  title: string;
  description: string;
  /** The arguments, with the same bounds as the REST parameters. */
  input: A;
  /** The output (MCP needs one object schema; a tool over two operations lists both shapes' fields as optional). */
  output: z.ZodObject;
  /** The operation that answers these arguments, and its input. */
  route(args: z.output<A>): { op: Operation; input: unknown };
  /** A short human-readable summary of the answer (the first text block; it names stale inputs and gaps). */
  summary(data: D): string;
}

/**
 * Declares a tool, keeping the argument and data types. Its arguments refuse undeclared keys
 * (closedObject: an `as_of` the tool does not take is an error naming the accepted arguments,
 * not ignored); `tools/list` shows that as `additionalProperties: false`.
 */
export function defineTool<A extends z.ZodObject, D>(t: ToolDefinition<A, D>): ToolDefinition<A, D> {
  return { ...t, input: closedObject(t.input, 'argument') as unknown as A };
}

/**
 * Keywords that describe a node (or hold definitions that `$ref`s point at by path) and stay
 * on the node beside the `anyOf` that replaces its `type` array; all others go into its branches.
 */
const NODE_KEYWORDS = new Set([
  'description',
  'title',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
  '$comment',
  '$id',
  '$schema',
  '$defs',
  'definitions',
]);

/** Keywords whose value is one subschema. */
const SCHEMA_KEYWORDS = [
  'additionalProperties',
  'additionalItems',
  'unevaluatedProperties',
  'unevaluatedItems',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'contentSchema',
] as const;
/** Keywords whose value is an array of subschemas (`items` may also be one subschema). */
const SCHEMA_ARRAY_KEYWORDS = ['items', 'prefixItems', 'anyOf', 'oneOf', 'allOf'] as const;
/**
 * Keywords whose value maps names to subschemas (draft-7 `dependencies` values may also be
 * arrays of property names: skipped as non-objects).
 */
const SCHEMA_MAP_KEYWORDS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies'] as const;

/**
 * The keywords that constrain values of the types named only (JSON Schema validation: e.g.
 * `minimum` ignores a string; `format`, as Ajv applies it, strings and numbers). A branch of
 * another type leaves them out; every keyword not listed here (`enum`, `const`, `not`,
 * `allOf`, ...) applies to every type and goes into every branch.
 */
const TYPE_KEYWORDS: Record<string, readonly string[]> = {
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'format'],
  string: ['minLength', 'maxLength', 'pattern', 'format', 'contentEncoding', 'contentMediaType', 'contentSchema'],
  array: [
    'items',
    'prefixItems',
    'additionalItems',
    'unevaluatedItems',
    'minItems',
    'maxItems',
    'uniqueItems',
    'contains',
    'minContains',
    'maxContains',
  ],
  object: [
    'properties',
    'patternProperties',
    'additionalProperties',
    'unevaluatedProperties',
    'required',
    'minProperties',
    'maxProperties',
    'propertyNames',
    'dependencies',
    'dependentRequired',
    'dependentSchemas',
  ],
};
/** Each type-specific keyword and the types it constrains (`integer` takes the number keywords). */
const KEYWORD_TYPES = new Map<string, readonly string[]>();
for (const [type, keys] of Object.entries(TYPE_KEYWORDS))
  for (const k of keys) KEYWORD_TYPES.set(k, [...(KEYWORD_TYPES.get(k) ?? []), ...(type === 'number' ? ['number', 'integer'] : [type])]);

/** Whether the JSON value `v` is of JSON Schema type `type` (`integer`: a number with no fraction). */
function isOfType(v: unknown, type: string): boolean {
  switch (type) {
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
    case 'integer':
      return Number.isInteger(v);
    default:
      return typeof v === type;
  }
}

/** The JSON Schema node `type`'s branch takes from `keywords`, or null when no value of `type` can pass them. */
function branchOf(type: string, keywords: Record<string, unknown>): Record<string, unknown> | null {
  const branch: Record<string, unknown> = { type };
  for (const [k, v] of Object.entries(keywords)) {
    const types = KEYWORD_TYPES.get(k);
    if (types && !types.includes(type)) continue;
    if (k === 'enum' && Array.isArray(v)) {
      // Only the listed values of this type can pass here; none: the branch accepts nothing.
      const values = v.filter((x) => isOfType(x, type));
      if (values.length === 0) return null;
      branch.enum = structuredClone(values);
    } else if (k === 'const' && !isOfType(v, type)) {
      return null;
    } else {
      branch[k] = structuredClone(v);
    }
  }
  return branch;
}

/**
 * Rewrites, in place and at every depth, each JSON Schema node with a `type` array as `anyOf`
 * with one `type` per branch (or one `type`, when one branch is left), accepting the same
 * values.
 *
 * zod writes a nullable scalar as `type: ["number", "null"]` and a union of scalars as
 * `type: ["number", "string"]`: legal JSON Schema, but a client that maps tool schemas onto a
 * single-`type` dialect (the OpenAPI subset of Gemini function declarations) may reject the
 * tool; the MCP Inspector's `--strict` schema-portability check warns about each one. E.g.
 * `{type: ["number", "null"], minimum: 0}` becomes `{anyOf: [{type: "number", minimum: 0},
 * {type: "null"}]}` and `{type: ["string", "null"], enum: ["a", "b"]}` becomes
 * `{type: "string", enum: ["a", "b"]}` (null was never accepted: one branch left, no `anyOf`).
 *
 * - Only subschemas are visited (`properties`, `items`, `anyOf`, `not`, `if`, `$defs`, ...:
 *   SCHEMA_KEYWORDS and the lists beside it), never values (`default`, `examples`, `enum`,
 *   `const`), which keep any `type` member they hold.
 * - Each branch gets every keyword of the node that can constrain its type (TYPE_KEYWORDS,
 *   branchOf): `minimum` goes to the number branch only, `enum`, `const`, `not`, `allOf`,
 *   ... to every branch, `enum` cut to the values of the branch's type; a branch no value can
 *   pass (an `enum` or `const` without a value of its type) is left out. Annotations and
 *   definitions (NODE_KEYWORDS) stay on the node.
 * - A node whose every branch would be left out accepts nothing: its `anyOf` keeps them all
 *   unchanged (an empty `anyOf` is not legal JSON Schema).
 *
 * zod's `override` hook does not see these arrays: they appear after it, when shared schemas
 * are inlined. test/mcp/tool-schemas.test.ts checks with Ajv that every tool's schemas accept
 * the same values before and after.
 * @param node a JSON Schema (draft-7 or 2020-12) object; anything else is left alone.
 */
export function singleTypeBranches(node: unknown): void {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return;
  const schema = node as Record<string, unknown>;
  for (const k of SCHEMA_KEYWORDS) singleTypeBranches(schema[k]);
  for (const k of SCHEMA_ARRAY_KEYWORDS) {
    const v = schema[k];
    if (Array.isArray(v)) v.forEach(singleTypeBranches);
    else singleTypeBranches(v);
  }
  for (const k of SCHEMA_MAP_KEYWORDS) {
    const v = schema[k];
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) Object.values(v).forEach(singleTypeBranches);
  }
  const types = schema.type;
  if (!Array.isArray(types)) return;
  if (types.length === 1) {
    schema.type = types[0];
    return;
  }
  const keywords: Record<string, unknown> = {};
  for (const key of Object.keys(schema)) {
    if (key === 'type' || NODE_KEYWORDS.has(key)) continue;
    keywords[key] = schema[key];
    delete schema[key];
  }
  delete schema.type;
  const kept = (types as string[]).map((type) => branchOf(type, keywords)).filter((b) => b !== null);
  if (kept.length === 1) Object.assign(schema, kept[0]);
  else schema.anyOf = kept.length > 0 ? kept : (types as string[]).map((type) => ({ type, ...structuredClone(keywords) }));
}

/** The `tools/list` entry of a tool: JSON Schemas converted once (draft-7, as the SDK does; one `type` per schema). */
export function listEntry(t: ToolDefinition): Tool {
  const convert = (schema: z.ZodType, io: 'input' | 'output') => {
    const json = z.toJSONSchema(schema, { target: 'draft-7', io });
    singleTypeBranches(json);
    return json;
  };
  return {
    name: t.name,
    title: t.title,
    description: t.description,
    inputSchema: convert(t.input, 'input') as Tool['inputSchema'],
    outputSchema: convert(t.output, 'output') as Tool['outputSchema'],
    annotations: READ_ONLY,
  };
}

/** The error a failed tool call carries in its text content, as JSON (the REST error object). */
export interface ToolError {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

/**
 * An `isError` result whose text is `{"error": {code, message, details?}}` with the REST code.
 * A service's refused field is worded as an argument ("Invalid argument 'end': ...").
 */
export function failure(refused: ServiceError): CallToolResult {
  const err = reworded(refused, 'argument');
  const body: ToolError = {
    error: err.details ? { code: err.code, message: err.message, details: err.details } : { code: err.code, message: err.message },
  };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}

/** What a tool call runs with: the services, the access rules, and who is calling. */
export interface ToolContext {
  services: Services;
  access: Access;
  /** Who is calling (from the API key in `Authorization: Bearer`, or anonymous). */
  caller: Caller;
  /**
   * Re-checks the caller before each call (stdio, where one process serves one key for its
   * whole life: a revoked key or a changed tier must count at once).
   * @throws ServiceError UNAUTHORIZED when the key is no longer valid.
   */
  reauthenticate?(): Promise<Caller>;
  /** Receives the limits after each metered call (the HTTP transport reports them as headers). */
  onLimits?(limits: LimitDecision): void;
  /** Logs an unexpected failure (its message is not shown to the client). */
  logError?(err: unknown, tool: string): void;
}

/** `Invalid argument 'days': Too small: ...`, naming the first bad field. */
function invalidArguments(err: z.ZodError): ServiceError {
  const first = err.issues[0];
  // An undeclared argument (closedObject): the message names it and the accepted ones.
  if (first?.code === 'unrecognized_keys') return new ServiceError('INVALID_PARAMETER', first.message, { field: first.keys[0] });
  const field = first?.path.join('.') ?? '';
  return new ServiceError(
    'INVALID_PARAMETER',
    fieldMessage('argument', field, first?.message ?? 'invalid value'),
    field ? { field } : undefined,
  );
}

/**
 * The arguments without a lone `random_string` when the tool takes no arguments. Some MCP
 * clients have sent such a placeholder to argument-less tools, and public MCP servers declare
 * one for that reason; refusing it would make `get_market_regime` and `get_assets` unusable
 * from those clients while telling the caller nothing they could change. Any other key, or
 * `random_string` beside others, is still refused as undeclared.
 */
function withoutPlaceholder(tool: ToolDefinition, args: unknown): unknown {
  if (Object.keys(tool.input.shape).length > 0 || !args || typeof args !== 'object') return args;
  const keys = Object.keys(args);
  return keys.length === 1 && keys[0] === 'random_string' ? {} : args;
}

/**
 * The age of the data every answer is computed from, for the model reading the summary: the
 * as-of day, the mode, and how many days before today (UTC, by the clock) it is. Offline the
 * answers are the bundled dataset's and are judged fresh against its own last day
 * (docs/live-data.md, "Freshness"): without this line a model would read them as today's.
 */
export function dataAge(services: Services, now: Date = new Date()): string {
  const { asOf, mode } = services.market;
  const today = now.toISOString().slice(0, 10);
  const age = Math.max(0, daysBetween(asOf, today));
  const source = mode === 'live' ? 'live data, ingested from public APIs' : 'the bundled historical dataset (offline mode), not live data';
  return `Data as of ${asOf} (${source}): ${age === 0 ? 'today' : `${age} day${age === 1 ? '' : 's'} before today, ${today} UTC`}.`;
}

/**
 * Authorizes and meters one tools/call with `policy` (services/access.ts), in REST's order:
 * re-checks the caller where asked, then a refusal (401, 403, 429) consumes no quota; any
 * other outcome, bad arguments included, counts as one request, as a REST request that the
 * guard let through and the route then refused with a 400 does.
 * @returns the caller, or the refusal.
 */
export async function admitCall(ctx: ToolContext, policy: Policy): Promise<{ caller: Caller } | { refused: ServiceError }> {
  const caller = ctx.reauthenticate ? await ctx.reauthenticate() : ctx.caller;
  // MCP takes API keys only (no JWT): a missing credential's 401 asks for a key.
  const denied = await ctx.access.authorizeCounted(caller, policy, { surfaceTakesJwt: false });
  if (denied) return { refused: denied };
  const metered = await ctx.access.meter(caller, policy);
  ctx.onLimits?.(metered.limits);
  return metered.error ? { refused: metered.error } : { caller };
}

/**
 * Runs one tools/call: admits it with the operation's policy (admitCall, as REST's guard
 * does), validates the arguments, runs the operation and returns its data as
 * structuredContent plus two text blocks, the summary and the JSON of structuredContent.
 * Failures are `isError` results with the REST error code. Arguments that do not validate
 * are admitted with the policy of the tool's argument-free route (every route of a tool has
 * the same policy: test/architecture/access-policy.test.ts).
 */
export async function runTool(ctx: ToolContext, tool: ToolDefinition, rawArgs: unknown): Promise<CallToolResult> {
  const args = tool.input.safeParse(withoutPlaceholder(tool, rawArgs ?? {}));
  try {
    const { op, input } = args.success ? tool.route(args.data) : { op: tool.route({} as never).op, input: undefined };
    const admitted = await admitCall(ctx, op.policy);
    if ('refused' in admitted) return failure(admitted.refused);
    if (!args.success) return failure(invalidArguments(args.error));
    const out = await op.run(ctx.services, admitted.caller, input as never);
    // A summary to read (stale inputs and gaps included), then the serialized JSON: the MCP
    // specification (tools, "Structured Content") asks a tool with structured content to return
    // it as text as well, for clients that hand the model `content` only.
    return {
      structuredContent: out.value as Record<string, unknown>,
      content: [
        { type: 'text', text: `${tool.summary(out.value)}\n${dataAge(ctx.services)}` },
        { type: 'text', text: out.json },
      ],
    };
  } catch (e) {
    if (e instanceof ServiceError) return failure(e);
    ctx.logError?.(loggableError(e), tool.name);
    return failure(unexpectedError(e));
  }
}
