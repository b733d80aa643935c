import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { type CallToolResult, CallToolRequestSchema, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { ServiceError } from '../errors.ts';
import { failure, listEntry, runTool, type ToolContext, type ToolDefinition } from './tool.ts';
import { TOOLS } from './tools/index.ts';

/** Server name and version announced at `initialize`. */
export const MCP_SERVER_INFO = { name: 'market-intel', version: '1.0.0' } as const;

const INSTRUCTIONS =
  'Crypto market intelligence computed from daily market data: five-level trading signals with the factors behind them, the BTC market regime, on-chain health of Ethereum, Solana and Hyperliquid, signal-change history and thesis health. All tools are read-only. Data is daily; `as_of` says which day.';

/**
 * One JSON Schema validator for every server: the SDK otherwise builds a new Ajv instance per
 * server, which is most of the cost of a stateless request.
 */
const JSON_SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

/** The tools by name, and the `tools/list` answer, built once (a stateless HTTP server is built per request). */
const BY_NAME = new Map<string, ToolDefinition>(TOOLS.map((t) => [t.name, t]));
const LIST: { tools: Tool[] } = { tools: TOOLS.map(listEntry) };

/**
 * Builds an MCP server (the SDK's low-level `Server`) with exactly the six read-only tools
 * (src/mcp/tools/), each a thin adapter over the operation REST serves, so
 * `structuredContent` equals the REST `data`. One server serves one caller (stateless HTTP
 * builds one per request; stdio one per process). An unknown tool is a NOT_FOUND result,
 * arguments outside the bounds INVALID_PARAMETER naming the field.
 */
export function createMcpServer(ctx: ToolContext): Server {
  const server = new Server(MCP_SERVER_INFO, {
    jsonSchemaValidator: JSON_SCHEMA_VALIDATOR,
    capabilities: { tools: { listChanged: false } },
    instructions: INSTRUCTIONS,
  });
  server.setRequestHandler(ListToolsRequestSchema, () => LIST);
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = BY_NAME.get(request.params.name);
    if (!tool)
      return failure(
        new ServiceError('NOT_FOUND', `Tool ${request.params.name} not found; the tools are ${[...BY_NAME.keys()].join(', ')}`),
      );
    return runTool(ctx, tool, request.params.arguments);
  });
  return server;
}
