import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Logger } from 'pino';
import { loggableError, ServiceError } from '../errors.ts';
import { type Access, anonymousCaller, type Caller, PUBLIC_UNMETERED } from '../services/access.ts';
import type { KeyService } from '../services/keys.ts';
import type { Services } from '../services/operation.ts';
import { createMcpServer } from './server.ts';

/** Environment variable that carries the API key for the stdio server. */
export const STDIO_KEY_ENV = 'MARKET_INTEL_API_KEY';

/** What the stdio server runs on: the core's services, keys and access rules, and its logger (stderr). */
export interface StdioDeps {
  services: Services & { keys: KeyService };
  access: Access;
  log: Logger;
  asOf: string | null;
  /** Called once when the client goes away (closes the core). */
  onClose(): Promise<void>;
}

/**
 * Serves the six MCP tools over stdio for local clients (Claude Desktop, Cursor, VS Code):
 * stdout carries the protocol, logs go to stderr. The caller is the API key in
 * MARKET_INTEL_API_KEY, or the unauthenticated tier without one; the key is checked again on
 * every call (a revoked key or a changed tier counts at once) and tool calls count against its
 * quota like REST requests, with the same access rules.
 * @throws ServiceError UNAUTHORIZED when the key is set but invalid or revoked (before serving
 *   anything; the message names the variable).
 */
export async function runStdio(deps: StdioDeps, apiKey: string | undefined): Promise<void> {
  const authenticate = async (): Promise<Caller> => {
    if (!apiKey) return anonymousCaller('stdio');
    // The same access rules and messages as REST and MCP over HTTP (the key is checked, never metered here).
    const auth = await deps.access.authenticate(`Bearer ${apiKey}`, PUBLIC_UNMETERED, 'stdio');
    if (auth.ok) return auth.caller;
    if (auth.cause) deps.log.error({ err: loggableError(auth.cause) }, 'dependency unavailable');
    throw new ServiceError(auth.error.code, `${STDIO_KEY_ENV}: ${auth.error.message}`, auth.error.details);
  };
  const caller = await authenticate();
  const server = createMcpServer({
    services: deps.services,
    access: deps.access,
    caller,
    reauthenticate: authenticate,
    logError: (err, tool) => deps.log.error({ err, tool }, 'MCP tool failed'),
  });
  const transport = new StdioServerTransport();
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await server.close().catch(() => {});
    await deps.onClose();
    process.exit(0);
  };
  transport.onclose = () => void close();
  process.stdin.on('end', () => void close());
  process.on('SIGINT', () => void close());
  process.on('SIGTERM', () => void close());
  await server.connect(transport);
  deps.log.info({ tier: caller.tier, as_of: deps.asOf }, 'MCP stdio server ready');
}
