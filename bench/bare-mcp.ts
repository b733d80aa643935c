// Baseline for the MCP benchmark: a bare MCP server on the same stack (Fastify + the SDK's
// stateless Streamable HTTP transport, JSON responses) with one tool, get_signals, that
// returns a fixed payload (what the real service returned) under the same input and output
// schemas, with no auth, no rate limiting and no logging.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';
import { GetSignalsOutput } from '../src/mcp/tools/index.ts';
import { handleMcpRequest } from '../src/mcp/http.ts';

const result = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as {
  structuredContent: Record<string, unknown>;
  content: { type: 'text'; text: string }[];
};
// The same shared JSON Schema validator as the service (a new Ajv per request would dominate).
const validator = new AjvJsonSchemaValidator();
const input = z.object({ asset: z.string().min(1).max(64).optional(), include_factors: z.boolean().default(false) });
const app = Fastify({ logger: false });
app.post('/mcp', async (req, reply) => {
  const server = new McpServer({ name: 'bare', version: '1.0.0' }, { jsonSchemaValidator: validator });
  server.registerTool(
    'get_signals',
    {
      inputSchema: input,
      outputSchema: GetSignalsOutput,
      annotations: { readOnlyHint: true },
    },
    async () => ({ structuredContent: result.structuredContent, content: result.content }),
  );
  return handleMcpRequest(server.server, req, reply, async () => ({}));
});
await app.listen({ port: Number(process.argv[3] ?? process.env.PORT ?? 0), host: '127.0.0.1' });
const addr = app.server.address();
process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : ''}\n`);
