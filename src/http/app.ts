import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Config } from '../config.ts';
import type { MarketService } from '../services/market.ts';
import { pingDatabase, type Database } from '../store/db.ts';
import { sendError } from './envelope.ts';
import { isDependencyDown, loggableError, ServiceError } from './errors.ts';
import { marketRoutes } from './routes/v1/market.ts';
import { keyRoutes } from './routes/v1/keys.ts';
import { thesisRoutes } from './routes/v1/theses.ts';
import { createGuard, type GuardDeps } from './guard.ts';
import type { KeyService } from '../services/keys.ts';
import type { ThesisService } from '../services/theses.ts';
import { mcpRoutes } from '../mcp/http.ts';

/** What the HTTP app is built from. */
export interface AppDeps {
  config: Pick<Config, 'LOG_LEVEL' | 'TRUST_PROXY'>;
  market: MarketService;
  database: Database | null;
  keys: KeyService;
  theses: ThesisService;
  guard: GuardDeps;
  /** The MCP endpoint at /mcp: host names accepted besides loopback (DNS-rebinding protection); omit to leave /mcp out. */
  mcp?: { allowedHosts: string[] };
  /** Registers more routes outside /api/v1 (the embedded identity provider, MCP). */
  extra?: (app: FastifyInstance) => Promise<void>;
  /** pino destination for tests (e.g. a stream that collects log lines); default stdout. */
  logStream?: NodeJS.WritableStream;
}

/** Fastify's trustProxy from TRUST_PROXY: a list of addresses/CIDRs, or false. */
function trustProxy(v: string | undefined): string[] | false {
  if (!v) return false;
  return v.split(',').map((s) => s.trim()).filter(Boolean);
}

const LOCATION: Record<string, string> = { querystring: 'query parameter', params: 'path parameter', body: 'body field', headers: 'header' };

/**
 * Builds the Fastify app: /api/v1 routes with the envelope, OpenAPI at
 * /api/v1/openapi.json, the API reference at /docs (local assets, no CDN), /healthz and
 * /readyz. Every request gets an id (echoed as `X-Request-Id` and in `meta.request_id`),
 * logged with each line.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: deps.config.LOG_LEVEL,
      // Request headers are never logged (see the onResponse hook); this guards any future
      // `req`/`headers` log field. No wildcard paths: they cost on every line.
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie'], censor: '[redacted]' },
      ...(deps.logStream ? { stream: deps.logStream } : {}),
    },
    genReqId: () => randomUUID(),
    // One access-log line per request (onResponse below) instead of Fastify's two.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    trustProxy: trustProxy(deps.config.TRUST_PROXY),
    // Errors Fastify raises before routing (bad percent-encoding, a too long path parameter)
    // get the envelope too.
    frameworkErrors: (err, req, reply) => {
      const code = (err as { code?: string }).code;
      const message =
        code === 'FST_ERR_BAD_URL' ? 'Malformed URL: invalid percent-encoding' : code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'A path parameter is too long (at most 100 characters)' : null;
      if (message) return sendError(req, reply, 400, 'INVALID_PARAMETER', message, undefined, deps.market.asOf);
      req.log.error({ err }, 'framework error');
      return sendError(req, reply, 500, 'INTERNAL_ERROR', 'Internal server error', undefined, deps.market.asOf);
    },
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  // Handlers send pre-serialized JSON strings; objects (if any) are plain JSON.stringify'd.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  const asOf = deps.market.asOf;

  app.addHook('onRequest', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
  });
  // Access log: method, path (no query string, which could carry secrets), status, time, tier.
  app.addHook('onResponse', async (req, reply) => {
    req.log.info(
      { method: req.method, path: req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10, tier: req.caller?.tier, ip: req.ip },
      'request completed',
    );
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ServiceError) {
      if (err.status >= 500) req.log.error({ err: loggableError(err) }, 'service error');
      return sendError(req, reply, err.status, err.code, err.message, err.details, asOf);
    }
    if (err.validation) {
      const where = LOCATION[err.validationContext ?? ''] ?? 'parameter';
      const first = err.validation[0];
      const field = first?.instancePath?.replace(/^\//, '').replace(/\//g, '.') || (first?.params as { missingProperty?: string } | undefined)?.missingProperty || '';
      const message = `Invalid ${where}${field ? ` '${field}'` : ''}: ${first?.message ?? 'invalid value'}`;
      return sendError(req, reply, 400, 'INVALID_PARAMETER', message, { location: err.validationContext, field }, asOf);
    }
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      // Fastify's own client errors (malformed JSON, wrong content type, body too large).
      return sendError(req, reply, 400, 'INVALID_PARAMETER', err.message, undefined, asOf);
    }
    if (isDependencyDown(err)) {
      req.log.error({ err: loggableError(err) }, 'dependency unavailable');
      return sendError(req, reply, 503, 'SERVICE_UNAVAILABLE', 'The service cannot reach its database; try again shortly', undefined, asOf);
    }
    req.log.error({ err: loggableError(err) }, 'unhandled error');
    return sendError(req, reply, 500, 'INTERNAL_ERROR', 'Internal server error', undefined, asOf);
  });

  const notFound = (req: FastifyRequest, reply: FastifyReply) =>
    sendError(req, reply, 404, 'NOT_FOUND', `Route ${req.method} ${req.url.split('?')[0]} not found`, undefined, asOf);
  app.setNotFoundHandler(notFound);

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Market Intelligence API',
        version: '1.0.0',
        description:
          'Explained crypto trading signals, the BTC market regime, on-chain health and chain metrics, computed point-in-time from real market data. Every response uses the envelope `{status, data, meta}`; errors `{status: "error", data: null, error: {code, message, details?}, meta}`. Methodology: docs/methodology.md.',
      },
      servers: [{ url: '/' }],
      tags: [
        { name: 'signals', description: 'Trading signals and their history' },
        { name: 'regime', description: 'BTC market regime' },
        { name: 'chains', description: 'On-chain health and metrics' },
        { name: 'assets', description: 'Supported assets' },
        { name: 'keys', description: 'Self-service API keys (JWT of a signed-in user)' },
        { name: 'theses', description: 'Theses and their health (owner only)' },
      ],
      components: {
        securitySchemes: {
          bearerApiKey: { type: 'http', scheme: 'bearer', description: 'API key `svc_live_...`; optional on public routes (tier unauthenticated without it)' },
          bearerJwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'JWT of a signed-in user from the identity provider (sign in at /signin)' },
        },
      },
      security: [{ bearerApiKey: [] }, {}],
    },
    transform: jsonSchemaTransform,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs', uiConfig: { url: '/api/v1/openapi.json' } as never });

  const guard = createGuard(deps.guard);
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', guard);
      // Its own handler so unknown /api/v1 routes pass the guard (rate-limit headers).
      v1.setNotFoundHandler(notFound);
      v1.get('/openapi.json', { schema: { hide: true }, config: { auth: 'none' } }, async () => app.swagger());
      await v1.register(marketRoutes, { market: deps.market });
      await v1.register(keyRoutes, { keys: deps.keys, asOf });
      await v1.register(thesisRoutes, { theses: deps.theses, asOf });
    },
    { prefix: '/api/v1' },
  );

  const mcp = deps.mcp;
  if (mcp) {
    await app.register(async (scope) => {
      await mcpRoutes(scope, { market: deps.market, theses: deps.theses, limiter: deps.guard.limiter, usage: deps.guard.usage, allowedHosts: mcp.allowedHosts, guard });
    });
  }

  if (deps.extra) await deps.extra(app);

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    const db = deps.database ? await pingDatabase(deps.database.db) : true;
    const ready = db && deps.market.signalSeries.size > 0;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ok' : 'unavailable', checks: { database: db, data: deps.market.signalSeries.size > 0 }, as_of: asOf });
  });

  return app;
}
