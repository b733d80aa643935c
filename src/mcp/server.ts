import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  type CallToolResult,
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  LATEST_PROTOCOL_VERSION,
  type InitializeResult,
  ListToolsRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';
import { ServiceError, unexpectedError } from '../errors.ts';
import type { StatusData } from '../services/schemas/market.ts';
import type { Served } from '../services/served.ts';
import { PUBLIC } from '../services/access.ts';
import { admitCall, failure, listEntry, runTool, type ToolContext, type ToolDefinition } from './tool.ts';
import { TOOLS } from './tools/index.ts';

/**
 * This package's version (`version` of package.json), read once when the module loads. The
 * file is two folders up from this module both in the sources (src/mcp/) and in the build
 * (dist/mcp/), which runs from the checkout.
 * @throws at load when package.json is missing or unreadable (a broken checkout).
 */
const PACKAGE_VERSION: string = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;

/** Server name and version announced at `initialize` (`serverInfo`; the version is package.json's). */
export const MCP_SERVER_INFO = { name: 'market-intel', version: PACKAGE_VERSION } as const;

const INSTRUCTIONS =
  'Crypto market intelligence computed from daily market data: five-level trading signals with the factors behind them, the BTC market regime, on-chain health of Ethereum, Solana and Hyperliquid, signal-change history and thesis health. All tools are read-only. Data is daily; `as_of` says which day.';

/**
 * One JSON Schema validator for every server: the SDK otherwise builds a new Ajv instance per
 * server, which is most of the cost of a stateless request.
 */
const JSON_SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

/** The tools by name, and their `tools/list` entries, built once (a stateless HTTP server is built per request). */
const BY_NAME = new Map<string, ToolDefinition>(TOOLS.map((t) => [t.name, t]));
const ENTRIES: Tool[] = TOOLS.map(listEntry);

/**
 * The series kinds each tool's answers are computed from (for its freshness line). A tool that
 * answers with signals (get_market_regime lists every asset's; get_assets gives each one's level
 * and score) reads what the signals read, chain metrics included.
 */
const TOOL_SERIES: Record<string, readonly StatusData['series'][number]['kind'][]> = {
  get_signals: ['candles', 'fear_greed', 'funding', 'metric'],
  get_market_regime: ['candles', 'fear_greed', 'funding', 'metric'],
  get_chain_health: ['metric'],
  get_assets: ['candles', 'fear_greed', 'funding', 'metric'],
  get_signal_history: ['candles'],
  get_thesis_health: ['candles', 'fear_greed', 'funding', 'metric'],
};

/**
 * A request schema that answers JSON-RPC -32602 Invalid params, with one sentence naming the
 * field, when `params` (absent, or an object: the SDK's transport refuses any other JSON-RPC
 * message before this) does not fit `schema`'s. The SDK (1.32) parses a request before its
 * handler and lets the parse error through as -32603 Internal error with the raw validation
 * issues as the message (modelcontextprotocol/typescript-sdk issue 2284); an error thrown by
 * the parse with a numeric `code` is answered with that code and message instead.
 * `hint` says what to send.
 */
function withInvalidParams<S extends typeof CallToolRequestSchema | typeof ListToolsRequestSchema | typeof InitializeRequestSchema>(
  schema: S,
  hint: string,
) {
  const method = schema.shape.method.value;
  const params = schema.shape.params as z.ZodType<z.output<S>['params']>;
  return z.object({
    method: schema.shape.method,
    params: z
      .unknown()
      .optional()
      .transform((value): z.output<S>['params'] => {
        const parsed = params.safeParse(value);
        if (parsed.success) return parsed.data;
        const issue = parsed.error.issues[0];
        const where = issue?.path.length ? `'params.${issue.path.join('.')}'` : "'params'";
        // Not an McpError: its message starts "MCP error -32602: ", and SDK clients prefix
        // the same again ("MCP error -32602: MCP error -32602: ..."). The SDK answers any
        // thrown error by its `code` and `message`.
        throw Object.assign(new Error(`Invalid ${method} params: ${where}: ${issue?.message ?? 'invalid value'}. ${hint}`), {
          code: ErrorCode.InvalidParams,
        });
      }),
  });
}

const CALL_TOOL_REQUEST = withInvalidParams(
  CallToolRequestSchema,
  'Send {"name": <a tool from tools/list>, "arguments": {<its arguments>}}.',
);
const LIST_TOOLS_REQUEST = withInvalidParams(ListToolsRequestSchema, 'Send no params, or {"cursor": <string>}.');
const INITIALIZE_REQUEST = withInvalidParams(
  InitializeRequestSchema,
  `Send {"protocolVersion": "${LATEST_PROTOCOL_VERSION}", "capabilities": {}, "clientInfo": {"name": <string>, "version": <string>}}.`,
);

/**
 * The JSON-RPC request methods this server answers: the SDK's own (`initialize`, re-registered
 * below, and `ping`) and the two tool methods. Named in the error of any other method;
 * test/mcp/mcp-http.test.ts checks it against the methods the SDK's server has handlers for.
 */
export const MCP_METHODS: readonly string[] = ['initialize', 'ping', 'tools/list', 'tools/call'];

/**
 * The -32601 Method not found message for `method`: the SDK's is a bare "Method not found";
 * this one names the method and the methods there are (a misspelt `tools/lsit`, or a
 * capability the server does not declare, such as `resources/list` or `prompts/list`).
 */
export function methodNotFoundMessage(method: string): string {
  const shown = method.length > 60 ? `${method.slice(0, 60)}…` : method;
  return `Method not found: ${JSON.stringify(shown)}; this MCP server answers ${MCP_METHODS.join(', ')} (tools only: no resources or prompts); call a tool with tools/call {"name": <a tool from tools/list>, "arguments": {...}}`;
}

/** `tools/list` answers by the status answer they were built from (rebuilt when the data or its freshness changes). */
const lists = new WeakMap<object, { tools: Tool[] }>();

/**
 * The `tools/list` answer: each tool's description ends with the freshness of the data it
 * answers from (the as-of day, the mode, and the stale series with their newest day), as
 * GET /api/v1/status reports it.
 */
function toolList(status: Served<StatusData>): { tools: Tool[] } {
  const hit = lists.get(status);
  if (hit) return hit;
  const s = status.value;
  const list = {
    tools: ENTRIES.map((e) => {
      const kinds = TOOL_SERIES[e.name] ?? [];
      const stale = s.series.filter((x) => x.stale && kinds.includes(x.kind));
      const shown = stale.slice(0, 6).map((x) => `${x.series} (newest ${x.newest_date})`);
      const empty = s.series.filter((x) => x.newest_date === null && kinds.includes(x.kind));
      const line =
        (s.mode === 'live'
          ? `Data freshness: live data as of ${s.as_of}, judged against ${s.reference_date}; `
          : `Data freshness: NOT live data: the bundled historical dataset (offline mode), which ends on ${s.as_of}; judged against that day, `) +
        (stale.length
          ? `stale among the series this tool reads: ${shown.join(', ')}${stale.length > shown.length ? ` and ${stale.length - shown.length} more` : ''}`
          : 'no series this tool reads is stale') +
        (empty.length
          ? `; ${empty.length} series ${empty.length === 1 ? 'holds' : 'hold'} no data (gaps: ${empty
              .slice(0, 3)
              .map((x) => x.series)
              .join(', ')}${empty.length > 3 ? ', ...' : ''})`
          : '') +
        '; the REST API lists every series at GET /api/v1/status. This is the freshness when the list was made: each result says the age of its data in days.';
      return { ...e, description: `${e.description ?? ''}\n\n${line}` };
    }),
  };
  lists.set(status, list);
  return list;
}

/**
 * Builds an MCP server (the SDK's low-level `Server`) with exactly the six read-only tools
 * (src/mcp/tools/), each a thin adapter over the operation REST serves, so
 * `structuredContent` equals the REST `data`. One server serves one caller (stateless HTTP
 * builds one per request; stdio one per process). An unknown tool is a NOT_FOUND result,
 * arguments outside the bounds INVALID_PARAMETER naming the field, a method other than
 * MCP_METHODS -32601 naming it and those. `ctx` may be a promise
 * (stdio answers `initialize` before the core is ready): the tool requests then wait for it.
 */
export function createMcpServer(ctx: ToolContext | Promise<ToolContext>): Server {
  const server = new Server(MCP_SERVER_INFO, {
    jsonSchemaValidator: JSON_SCHEMA_VALIDATOR,
    capabilities: { tools: { listChanged: false } },
    instructions: INSTRUCTIONS,
  });
  // initialize as the SDK answers it (its handler, re-registered: setRequestHandler replaces),
  // with malformed params answered -32602 naming the field instead of -32603 with raw issues.
  const sdk = server as unknown as { _oninitialize(r: z.output<typeof InitializeRequestSchema>): Promise<InitializeResult> };
  server.setRequestHandler(INITIALIZE_REQUEST, (request) => sdk._oninitialize(request as z.output<typeof InitializeRequestSchema>));
  // A pending context (stdio while the core starts): tools/list and tools/call wait for it.
  // Its refusal (stdio's key refused) is answered as MCP over HTTP answers one: -32001 with
  // `data: {code, reason}`, not the SDK's -32603 "internal error" for any thrown value.
  const ready = async (): Promise<ToolContext> => {
    if (!(ctx instanceof Promise)) return ctx;
    try {
      return await ctx;
    } catch (err) {
      if (!(err instanceof ServiceError) || err.code !== 'UNAUTHORIZED') throw err;
      const reason = typeof err.details?.reason === 'string' ? { reason: err.details.reason } : {};
      throw Object.assign(new Error(err.message), { code: -32001, data: { code: err.code, ...reason } });
    }
  };
  // Any other request method: -32601 naming it and the supported ones (the SDK's public
  // fallback, run where it would answer a bare "Method not found"; notifications are not requests).
  server.fallbackRequestHandler = async (request) => {
    throw Object.assign(new Error(methodNotFoundMessage(request.method)), { code: ErrorCode.MethodNotFound });
  };
  server.setRequestHandler(LIST_TOOLS_REQUEST, async () => toolList((await ready()).services.market.status()));
  server.setRequestHandler(CALL_TOOL_REQUEST, async (request): Promise<CallToolResult> => {
    const tool = BY_NAME.get(request.params.name);
    const c = await ready();
    if (!tool) {
      // Counted as REST counts a request to an unknown /api/v1 route (the public policy).
      const admitted = await admitCall(c, PUBLIC).catch((e: unknown) => ({ refused: unexpectedError(e) }));
      if ('refused' in admitted) return failure(admitted.refused);
      return failure(
        new ServiceError('NOT_FOUND', `Tool ${request.params.name} not found; the tools are ${[...BY_NAME.keys()].join(', ')}`),
      );
    }
    return runTool(c, tool, request.params.arguments);
  });
  return server;
}
