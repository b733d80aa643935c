import type { IncomingHttpHeaders } from 'node:http';
import fastifyCompress from '@fastify/compress';
import fastifyCors from '@fastify/cors';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { isDependencyDown, loggableError, memoRetrying, OutageLog, retryAfterOf, ServiceError } from '../errors.ts';
import { invalidEnvelope, messageId, repeatedId } from './envelope.ts';
import { rateLimitAddress } from '../rate-limit/address.ts';
import { rateLimitHeaders, type LimitDecision, type TierRateLimiter } from '../rate-limit/limiter.ts';
import {
  type Caller,
  mcpControlCap,
  PUBLIC_UNMETERED,
  misplacedCredential,
  rateLimited,
  refusalHeaders,
  type Access,
} from '../services/access.ts';
import type { Services } from '../services/operation.ts';

/**
 * The MCP SDK's Streamable HTTP transport and our MCP server (./server.ts), loaded on the first
 * /mcp request instead of at start-up: the SDK with its schema libraries is about 250 ms of
 * module loading that the REST service and /readyz do not need (issue #13, "heavy modules
 * loaded when first needed"; docs/benchmarks.md, "Start-up"). The first MCP request pays it
 * once. Rejects only if the modules cannot be loaded (a broken install).
 */
export const loadMcpModules: () => Promise<{
  Transport: typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js').WebStandardStreamableHTTPServerTransport;
  createMcpServer: typeof import('./server.ts').createMcpServer;
}> = memoRetrying(() =>
  // A failed load (e.g. too many open files) is not kept: the next request tries again.
  Promise.all([import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'), import('./server.ts')]).then(([t, s]) => ({
    Transport: t.WebStandardStreamableHTTPServerTransport,
    createMcpServer: s.createMcpServer,
  })),
);

/** Host names always accepted in `Host`/`Origin` by /mcp (loopback). */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'] as const;

/** Most JSON-RPC messages one POST /mcp may carry (a batch); each counts on its own. */
export const MCP_MAX_BATCH = 50;

/**
 * Request headers a browser MCP client may send to /mcp (CORS): the MCP Streamable HTTP
 * transport's (2025-06-18: `Mcp-Protocol-Version`, `Mcp-Session-Id`, `Last-Event-ID`) and the API key's.
 */
const MCP_CORS_ALLOWED_HEADERS = 'Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID';

/** Response headers a browser MCP client may read on /mcp (CORS): the transport's, the rate limits, the request id. */
const MCP_CORS_EXPOSED_HEADERS =
  'Mcp-Session-Id, Mcp-Protocol-Version, X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, X-Service-Tier, RateLimit, RateLimit-Policy, Retry-After';

/** What the /mcp endpoint needs. */
export interface McpHttpDeps {
  services: Services;
  /** The access rules shared with REST (services/access.ts). */
  access: Access;
  /** For the cap on requests other than tools/call. */
  limiter: TierRateLimiter;
  /** Host names accepted in `Host` and `Origin` (any port), besides the loopback ones. */
  allowedHosts: readonly string[];
  /** The log of dependency outages, shared with REST (one line per 10 s, not per request). */
  outageLog?: OutageLog;
}

/** The host name of a `Host` header value or an origin URL, lower-case, without port. */
export function hostName(v: string): string | null {
  try {
    return new URL(v.includes('://') ? v : `http://${v}`).hostname.toLowerCase();
  } catch {
    return null;
  }
}

/**
 * A JSON-RPC error answered over HTTP: `{jsonrpc, error: {code, message, data?}, id}` with the
 * HTTP `status`. `data` carries the REST error's code and details where there is one (e.g. a
 * 429's `{code: 'RATE_LIMITED', window, limit, reset, retry_after, scope}`).
 */
function rpcError(
  reply: FastifyReply,
  status: number,
  code: number,
  message: string,
  id: string | number | null = null,
  data?: Record<string, unknown>,
): FastifyReply {
  return reply
    .code(status)
    .type('application/json')
    .send(JSON.stringify({ jsonrpc: '2.0', error: data ? { code, message, data } : { code, message }, id }));
}

function webHeaders(h: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.append(k, x);
    else out.set(k, v);
  }
  return out;
}

/**
 * Answers one Streamable HTTP request with a fresh stateless MCP server (no session, JSON
 * responses, per the MCP 2025-06-18 transport): converts the Fastify request into a web
 * Request (the body already parsed by Fastify), lets the SDK's transport handle it, and
 * copies the Response back.
 */
export async function handleMcpRequest(
  server: Server,
  req: FastifyRequest,
  reply: FastifyReply,
  extraHeaders: () => Promise<Record<string, string>>,
): Promise<FastifyReply> {
  const { Transport } = await loadMcpModules();
  const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url}`, {
      method: req.method,
      headers: webHeaders(req.headers),
    });
    const res = await transport.handleRequest(request, { parsedBody: req.body });
    let body = await res.text();
    // JSON-RPC 2.0, "Batch": a batch is answered with an array, also when one answer is in it
    // (the SDK's transport sends a lone answer as a bare object).
    if (Array.isArray(req.body) && res.status === 200 && body.startsWith('{')) body = `[${body}]`;
    res.headers.forEach((v, k) => {
      reply.header(k, v);
    });
    reply.headers(await extraHeaders());
    return reply.code(res.status).send(body);
  } finally {
    await server.close();
  }
}

/**
 * A refused authentication as an HTTP response: the JSON-RPC error (`data`: `{code, reason}`,
 * on a 429 `{code, window, limit, reset, retry_after, scope?}` as REST's details, on a passing
 * 503 `{code, retry_after}`) with the client address's rate-limit headers and `Retry-After` on
 * a 429 or a passing 503, answering `id`
 * (refusedRequestId: the request's own, or null).
 *
 * A refused credential (bad header, malformed, unknown or revoked key, a JWT) is 403, not 401:
 * in MCP a 401 means "get an OAuth access token" (MCP authorization 2025-06-18, which points
 * clients at RFC 9728 protected-resource metadata on a 401), and real clients act on it:
 * the MCP Inspector starts an interactive OAuth flow (or, without a TTY, says "Interactive
 * OAuth requires a TTY") and `mcp-remote` fails in authorization-server discovery, neither
 * showing our message. This server does not use MCP authorization (it is optional), it takes
 * API keys; credentials were presented and refused, which RFC 9110 section 15.5.4 allows as
 * 403. Both clients (and the SDK's StreamableHTTPClientTransport) surface a 403's body. No
 * `WWW-Authenticate` is sent: some clients read a 403 challenge as a step-up request.
 * REST keeps 401 with `WWW-Authenticate` (RFC 6750), for clients that do not do MCP OAuth.
 */
function refuse(reply: FastifyReply, err: ServiceError, limits: LimitDecision, id: string | number | null): FastifyReply {
  reply.headers(refusalHeaders(err, limits));
  const status = err.code === 'UNAUTHORIZED' ? 403 : err.status;
  // A 429 (the address's failed-auth budget) carries REST's details: window, limit, reset, retry_after, scope;
  // a passing 503 (the key look-up's database or the identity provider down) its retry_after.
  const wait = retryAfterOf(err.code, err.details);
  const data =
    err.code === 'RATE_LIMITED' && err.details
      ? { code: err.code, ...err.details }
      : {
          code: err.code,
          ...(typeof err.details?.reason === 'string' && { reason: err.details.reason }),
          ...(wait !== undefined && { retry_after: wait }),
        };
  return reply
    .code(status)
    .type('application/json')
    .send(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: err.message, data }, id }));
}

/**
 * The id to answer a request refused before it is read (a refused key) with: the id of a
 * body that is one JSON-RPC request (an object with a string `method` and a string or
 * integer `id`), so the client can match the error to its request; null for anything else
 * (a batch, a notification, a response, an unusable id), as JSON-RPC 2.0 answers a request
 * whose id cannot be determined.
 */
export function refusedRequestId(body: unknown): string | number | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  return typeof (body as { method?: unknown }).method === 'string' ? messageId(body) : null;
}

/**
 * Whether `m` is a tools/call the tool layer meters against the API quota: a request (with an
 * id; the SDK hands notifications to no handler) whose params the call schema accepts far
 * enough to reach the tool (a string `name`, `arguments` an object or absent). Every other
 * message, a malformed or notification tools/call included, counts against the control cap,
 * or it would cost a server and a transport per message and count nowhere.
 */
function meteredToolCall(m: unknown): boolean {
  const o = m as { id?: unknown; method?: unknown; params?: { name?: unknown; arguments?: unknown; _meta?: unknown } };
  if (o.method !== 'tools/call' || o.id === undefined || typeof o.params?.name !== 'string') return false;
  const objectOrAbsent = (v: unknown) => v === undefined || (typeof v === 'object' && v !== null && !Array.isArray(v));
  return objectOrAbsent(o.params.arguments) && objectOrAbsent(o.params._meta);
}

/** The answer at the OAuth discovery addresses MCP clients probe: this server takes API keys. */
export const NO_OAUTH_MESSAGE =
  'This MCP server does not use OAuth (no protected-resource metadata): send an API key as Authorization: Bearer svc_live_... (create one at /signin), or no key for the unauthenticated tier';

/**
 * The MCP endpoint at /mcp: Streamable HTTP, stateless, JSON responses (a Fastify plugin; the
 * server mounts it beside the REST app). Refuses `Host` or `Origin` values outside the allowed
 * hosts (403, DNS-rebinding protection) and credentials in the query string (400), then
 * identifies the caller from the API key with the shared access rules (a bad key is a 403
 * with a JSON-RPC error naming it before any tool runs, see `refuse`; no key is the
 * unauthenticated tier). Each
 * tools/call is authorized and metered with its operation's policy, as the REST route is; the
 * rate-limit headers describe the caller's quota.
 */
export async function mcpRoutes(app: FastifyInstance, deps: McpHttpDeps): Promise<void> {
  const outageLog = deps.outageLog ?? new OutageLog();
  // Body errors, which Fastify raises before the transport sees the request, get a JSON-RPC
  // error like the transport's own (parse error -32700), not the REST envelope; any other
  // error goes on to the app's handler.
  app.setErrorHandler((err: FastifyError, req, reply) => {
    switch (err.code) {
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return rpcError(reply, 400, -32700, 'Parse error: the body is not valid JSON; send one JSON-RPC message as application/json');
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return rpcError(reply, 415, -32000, 'Unsupported Content-Type: send JSON-RPC messages with Content-Type: application/json');
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return rpcError(
          reply,
          413,
          -32000,
          `Request body is too large: at most ${req.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit!} bytes`,
        );
      default:
        throw err;
    }
  });
  // Answers over 1 KB compressed by Accept-Encoding, as REST's (src/http/app.ts): a
  // get_signals with factors is ~57 KB of JSON, a few KB compressed.
  await app.register(fastifyCompress, { encodings: ['br', 'gzip', 'deflate'], threshold: 1024 });
  const allowed = new Set<string>([...LOOPBACK_HOSTS, '::1', ...deps.allowedHosts.map((h) => h.toLowerCase())]);
  // What a refused Host or Origin may be instead, and the setting that adds one (README, "Over HTTP").
  const ALLOWED_HOSTS_HINT = "accepted: loopback, PUBLIC_URL's host and the hosts in MCP_ALLOWED_HOSTS (the operator adds one there)";

  app.addHook('onRequest', async (req, reply) => {
    const host = req.headers.host;
    const h = host ? hostName(host) : null;
    if (!h || !allowed.has(h))
      return rpcError(reply, 403, -32000, `Host '${host ?? ''}' is not allowed (DNS-rebinding protection); ${ALLOWED_HOSTS_HINT}`);
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null') {
      const o = hostName(origin);
      if (!o || !allowed.has(o))
        return rpcError(reply, 403, -32000, `Origin '${origin}' is not allowed (DNS-rebinding protection); ${ALLOWED_HOSTS_HINT}`);
    } else if (origin === 'null') {
      return rpcError(reply, 403, -32000, "Origin 'null' is not allowed");
    }
    const misplaced = misplacedCredential(req.query, req.headers);
    if (misplaced !== null) return rpcError(reply, 400, -32600, misplaced.message);
  });
  // One budget per cap (tiers with the same cap share one; a caller's tier change starts a fresh count).
  const controlBudget = (tier: Caller['tier']) => {
    const cap = mcpControlCap(tier);
    return { cap, budget: deps.limiter.budget(`mcp-control-${cap}`, cap, 60) };
  };

  // RFC 9728 protected-resource metadata, at the root and for the /mcp path: none (404 saying so).
  const noOAuth = async () => {
    throw new ServiceError('NOT_FOUND', NO_OAUTH_MESSAGE);
  };
  app.get('/.well-known/oauth-protected-resource', { schema: { hide: true } }, noOAuth);
  app.get('/.well-known/oauth-protected-resource/mcp', { schema: { hide: true } }, noOAuth);

  // Stateless server: no server-initiated SSE stream and no sessions to delete.
  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) => {
    reply.header('Allow', 'POST');
    return rpcError(reply, 405, -32000, 'Method not allowed: this MCP server is stateless; use POST');
  };
  // The /mcp routes in their own scope, for CORS: browser-based MCP clients (the MCP Inspector
  // connecting directly, a web app) read answers only with it. Origins are those the Origin
  // check above lets through (loopback and MCP_ALLOWED_HOSTS; others get 403 before this);
  // no credentials mode: keys travel in Authorization. The scope's prefix keeps the plugin's
  // catch-all preflight route to /mcp/*, and the OPTIONS route below gives /mcp itself one.
  await app.register(
    async (mcp) => {
      // An OPTIONS that is not a CORS preflight (no Origin or no Access-Control-Request-Method,
      // e.g. `curl -X OPTIONS`) asks which methods /mcp takes (RFC 9110 section 9.3.7): 204 with
      // Allow, before @fastify/cors, which would answer a plain-text 400 "Invalid Preflight
      // Request". Under /mcp/ only the plugin's catch-all takes OPTIONS: no such route (404).
      mcp.addHook('onRequest', (req, reply, done) => {
        if (req.method !== 'OPTIONS' || (req.headers.origin && req.headers['access-control-request-method'])) return done();
        if (req.routeOptions.url?.endsWith('*')) reply.callNotFound();
        else reply.code(204).header('allow', 'OPTIONS, POST').header('cache-control', 'no-store').send();
      });
      await mcp.register(fastifyCors, {
        origin: true,
        methods: ['POST', 'GET', 'DELETE'],
        allowedHeaders: MCP_CORS_ALLOWED_HEADERS,
        exposedHeaders: MCP_CORS_EXPOSED_HEADERS,
        credentials: false,
        maxAge: 600,
      });
      mcp.options('/', { schema: { hide: true } }, async (_req, reply) => reply.code(204).send());
      mcp.post('/', { schema: { hide: true } }, async (req, reply) => {
        const auth = await deps.access.authenticate(req.headers.authorization, PUBLIC_UNMETERED, rateLimitAddress(req.ip));
        if (!auth.ok) {
          if (auth.cause) outageLog.error(req.log, loggableError(auth.cause), 'dependency unavailable');
          return refuse(reply, auth.error, auth.limits, refusedRequestId(req.body));
        }
        const caller = auth.caller;
        // For the access log (src/http/app.ts): the tier and key of the MCP request, as for REST.
        req.caller = caller;
        const messages: unknown[] = Array.isArray(req.body) ? req.body : [req.body];
        // JSON-RPC 2.0, "Batch": an empty array is an invalid request, answered with one error.
        if (messages.length === 0)
          return rpcError(
            reply,
            400,
            -32600,
            'Invalid Request: the batch is empty; send a JSON-RPC message (an object) or a non-empty array of them',
          );
        if (messages.length > MCP_MAX_BATCH)
          return rpcError(
            reply,
            400,
            -32600,
            `A batch may hold at most ${MCP_MAX_BATCH} messages (this one holds ${messages.length}): send them in smaller batches`,
          );
        for (const m of messages) {
          const why = invalidEnvelope(m);
          if (why)
            return rpcError(
              reply,
              400,
              -32600,
              `Invalid Request: ${why}; send {"jsonrpc": "2.0", "id": <number or string>, "method": <string>, "params": {...}}`,
              messages.length === 1 ? messageId(m) : null,
            );
        }
        const repeated = messages.length > 1 ? repeatedId(messages) : null;
        if (repeated !== null)
          return rpcError(
            reply,
            400,
            -32600,
            `Invalid Request: the batch holds more than one request with the id ${JSON.stringify(repeated)}; give each request of a batch its own id`,
          );
        // Each message other than tools/call counts once against the cap, batched or not
        // (tools/call is counted per call against the API quota, in the tool).
        const controlMessages = messages.filter((m) => !meteredToolCall(m)).length;
        if (controlMessages > 0) {
          const control = controlBudget(caller.tier);
          const b = await control.budget.consume(caller.subject, controlMessages);
          if (!b.allowed) {
            reply.header('Retry-After', String(b.retryAfterSec));
            reply.headers(rateLimitHeaders(await deps.access.peek(caller)));
            const refused = rateLimited(
              `Too many MCP messages other than tools/call: at most ${control.cap} per minute on the ${caller.tier} tier, each message of a batch counted; retry in ${b.retryAfterSec} s (a client that stays connected sends initialize and tools/list once, not before every call)`,
              'minute',
              control.cap,
              new Date(Date.now() + b.resetMs),
              b.retryAfterSec,
              'mcp-control',
            );
            return rpcError(reply, 429, -32000, refused.message, messages.length === 1 ? messageId(messages[0]) : null, {
              code: refused.code,
              ...refused.details,
            });
          }
        }
        let decision: LimitDecision | undefined;
        const { createMcpServer } = await loadMcpModules();
        const server = createMcpServer({
          services: deps.services,
          access: deps.access,
          caller,
          onLimits: (limits) => {
            decision = limits;
          },
          logError: (err, tool) =>
            isDependencyDown(err)
              ? outageLog.error(req.log, err, 'MCP tool failed: dependency unavailable', { tool })
              : req.log.error({ err, tool }, 'MCP tool failed'),
        });
        return handleMcpRequest(server, req, reply, async () => rateLimitHeaders(decision ?? (await deps.access.peek(caller))));
      });
      // Every other method gets the same 405 (PUT and PATCH were a REST 404 envelope).
      mcp.route({ method: ['GET', 'DELETE', 'PUT', 'PATCH'], url: '/', schema: { hide: true }, handler: notAllowed });
    },
    { prefix: '/mcp' },
  );
}
