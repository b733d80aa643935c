import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Config } from '../config.ts';
import { keyCaller, type Caller } from '../http/guard.ts';
import { ServiceError } from '../http/errors.ts';
import { createService } from '../server.ts';
import { createMcpServer } from './tools.ts';

/** Environment variable that carries the API key for the stdio server. */
export const STDIO_KEY_ENV = 'MARKET_INTEL_API_KEY';

/**
 * Runs the six MCP tools over stdio for local clients (Claude Desktop, Cursor, VS Code): the
 * whole service core in this process (no HTTP listener), logs to stderr (stdout carries the
 * protocol). The caller is the API key in MARKET_INTEL_API_KEY, or unauthenticated without
 * one; tool calls count against that key's quota like REST requests.
 * @throws ServiceError UNAUTHORIZED when the key is set but invalid or revoked (the process
 *   exits before serving anything).
 */
export async function runStdio(config: Config, apiKey: string | undefined): Promise<void> {
  const svc = await createService({ ...config, LOG_LEVEL: config.LOG_LEVEL }, { logStream: process.stderr });
  let caller: Caller;
  try {
    if (apiKey) {
      caller = keyCaller(await svc.keys.authenticate(apiKey));
    } else {
      caller = { kind: 'anonymous', tier: 'unauthenticated', subject: 'stdio' };
    }
  } catch (err) {
    await svc.stop();
    if (err instanceof ServiceError) throw new ServiceError(err.code, `${STDIO_KEY_ENV}: ${err.message}`);
    throw err;
  }
  const server = createMcpServer({
    market: svc.market,
    theses: svc.theses,
    caller,
    // The key is checked again on every call: revoked or re-tiered keys count at once.
    reauthenticate: async () => {
      if (!apiKey) return caller;
      caller = keyCaller(await svc.keys.authenticate(apiKey));
      return caller;
    },
    consume: () => svc.limiter.consume(caller.subject, caller.tier),
    served: () => {
      if (caller.kind === 'key') svc.usage.record(caller.keyId);
    },
    logError: (err, tool) => svc.app.log.error({ err, tool }, 'MCP tool failed'),
  });
  const transport = new StdioServerTransport();
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await server.close().catch(() => {});
    await svc.stop();
    process.exit(0);
  };
  transport.onclose = () => void close();
  process.stdin.on('end', () => void close());
  process.on('SIGINT', () => void close());
  process.on('SIGTERM', () => void close());
  await server.connect(transport);
  svc.app.log.info({ tier: caller.tier, as_of: svc.market.asOf }, 'MCP stdio server ready');
}
