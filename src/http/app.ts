import { randomUUID } from 'node:crypto';
import { maxHeaderSize } from 'node:http';
import fastifyCompress from '@fastify/compress';
import fastifyCors from '@fastify/cors';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, {
  errorCodes,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
  type preValidationHookHandler,
} from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { KEY_PREFIX } from '../auth/api-keys.ts';
import type { EmbeddedIdentity } from '../auth/identity-lazy.ts';
import type { Config } from '../config.ts';
import { fieldMessage, loggableError, OutageLog, ServiceError, unexpectedError } from '../errors.ts';
import { rateLimitAddress } from '../rate-limit/address.ts';
import { rateLimitHeaders, TierRateLimiter } from '../rate-limit/limiter.ts';
import { type Access, anonymousCaller, PUBLIC_UNMETERED } from '../services/access.ts';
import type { Services } from '../services/operation.ts';
import { OPERATIONS } from '../services/operations/index.ts';
import { openApiDocumentHandler } from './caching.ts';
import { sendError, sendServiceError } from './envelope.ts';
import { createClientErrorHandler } from './client-error.ts';
import { createGuard } from './guard.ts';
import { HttpMetrics, PROTOCOL_ERROR } from './metrics.ts';
import { openApiTransform, openApiTransformObject } from './openapi.ts';
import { identityRoutes } from './identity.ts';
import { pageHeaders, SITE_PAGES } from './page-headers.ts';
import { v1Routes } from './routes/v1.ts';
import { LOCATION_NOUN } from './route.ts';

/** Content-Security-Policy of the API reference at /docs (Swagger UI, served from local files). */
const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/** Content-Security-Policy of the 404 page (no script, style or image of its own). */
const NOT_FOUND_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
/** What the HTTP app is built from: the core's services and access rules (src/core.ts builds them). */
export interface HttpDeps {
  config: Pick<Config, 'TRUST_PROXY' | 'CORS_ORIGINS' | 'METRICS'>;
  /** The process logger; Fastify logs through it. */
  log: Logger;
  services: Services;
  access: Access;
  /** Rate limiter for the identity provider's sign-in throttle (src/http/identity.ts). */
  limiter?: TierRateLimiter;
  /** Readiness of the dependencies, for /readyz; each check must be bounded in time (src/server.ts: 800 ms). */
  ready(): Promise<{ database: boolean; data: boolean }>;
  /** Whether Redis answers, or null when it is not configured (metrics). */
  redisUp?(): boolean | null;
  /** The log of dependency outages, shared with MCP and the dashboard (one line per 10 s, not per request). */
  outageLog?: OutageLog;
}

/** Response headers a browser script may read on /api/v1 (CORS). */
const EXPOSED_HEADERS = [
  'X-Request-Id',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'X-Service-Tier',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'WWW-Authenticate',
  'ETag',
];

/** Methods whose requests carry no body: an empty body sent with any Content-Type is no body. */
const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

/**
 * The message for Fastify's body errors (its FST_ERR_CTP_* codes), saying what to send
 * instead; null for any other code. `contentType` is the request's header, `bodyLimit` bytes.
 */
export function bodyErrorMessage(code: string | undefined, contentType: string | undefined, bodyLimit: number): string | null {
  switch (code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return `Unsupported Content-Type ${contentType ? `'${contentType}'` : '(none)'}: send the body as JSON with Content-Type: application/json`;
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return `Request body is too large: at most ${bodyLimit.toLocaleString('en-US')} bytes`;
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'The body is empty but Content-Type is application/json: send a JSON object (or no Content-Type without a body)';
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return 'Body is not valid JSON (or has a __proto__ or constructor.prototype key, which is refused): send a JSON object';
    default:
      return null;
  }
}

/**
 * The message of a body refused as a whole (a validation issue at the root, `details.field`
 * `body`). A JSON array, string or number where the route takes an object (`invalid_type`,
 * whose `reason` is "must be an object, got an array") says that a JSON object is expected;
 * any other root issue reads "Invalid body: REASON".
 */
export function wholeBodyMessage(keyword: string | undefined, reason: string | undefined): string {
  if (keyword !== 'invalid_type') return `Invalid body: ${reason ?? 'invalid value'}`;
  const got = reason ? /, got (.+)$/.exec(reason)?.[1] : undefined;
  return `Invalid body: expected a JSON object${got ? `, got ${got}` : ''}; send the fields as a JSON object ({"name": value, ...}; the API reference at /docs lists this route's fields)`;
}

/** Whether `schema` is a zod body schema that allows no body (`POST /api/v1/keys/create`). */
function allowsNoBody(schema: unknown): boolean {
  const zod = schema as { safeParse?: (v: unknown) => { success: boolean } } | undefined;
  return typeof zod?.safeParse === 'function' && zod.safeParse(undefined).success;
}

/**
 * fastify-type-provider-zod's validator, except that a missing body is no body for a body
 * schema that allows none (`POST /api/v1/keys/create`, README): Fastify hands a request
 * without body and Content-Type to the body validator as null, which such a schema refuses.
 * A JSON body `null` cannot be told from that here: such routes refuse it before validation
 * (refuseNullBody), as routes whose body schema needs a body do.
 */
const bodyOptionalAware: typeof validatorCompiler = (route) => {
  const validate = validatorCompiler(route);
  if (route.httpPart !== 'body' || !allowsNoBody(route.schema)) return validate;
  return (data) => validate(data === null ? undefined : data);
};

/** A request URL without its query string (which could carry secrets). */
function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/**
 * An OPTIONS request that is not a CORS preflight (no `Origin` or no
 * `Access-Control-Request-Method`): a client asking which methods a path takes.
 */
function isPlainOptions(req: FastifyRequest): boolean {
  return req.method === 'OPTIONS' && (!req.headers.origin || !req.headers['access-control-request-method']);
}

/** The methods of the service's routes, for telling a wrong method from a wrong path. */
const ROUTE_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** An API key written into a path (`/api/v1/signals/svc_live_...`, a paste in the wrong place). */
const KEY_IN_PATH = new RegExp(`${KEY_PREFIX}([A-Za-z0-9]{0,4})[A-Za-z0-9]*`, 'g');

/**
 * A JWT written into a path (`/api/v1/keys/eyJhbGci...`): base64url header `eyJ` (`{"`),
 * payload and signature, each dot-separated (RFC 7519 section 3; the signature may be empty).
 */
const JWT_IN_PATH = /eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;

/**
 * The path of a request as the access log writes it: without its query string, with any
 * API key in it cut to its display prefix (`svc_live_` + 4 characters, as key lists show it)
 * and any JWT cut to `eyJ...` (it is a bearer credential for 15 minutes and its payload names
 * the user's email), so that a credential pasted into a URL does not end up whole in the log.
 */
function loggedPath(url: string): string {
  return pathOf(url).replace(KEY_IN_PATH, `${KEY_PREFIX}$1...`).replace(JWT_IN_PATH, 'eyJ...');
}

/**
 * A browser's navigation to a page that does not exist: GET or HEAD asking for HTML, outside
 * the API, MCP, identity and static paths (whose clients read the JSON envelope).
 */
function isPageNavigation(req: FastifyRequest): boolean {
  return (
    (req.method === 'GET' || req.method === 'HEAD') &&
    /\btext\/html\b/.test(req.headers.accept ?? '') &&
    !/^\/(api|mcp|auth|app|docs)(\/|$)/.test(pathOf(req.url))
  );
}

/** The HTML 404 page for `path` (escaped), linking to the site's pages (SITE_PAGES, as the dashboard's navigation does). */
function notFoundPage(path: string): string {
  const esc = path.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
    '<title>Page not found - Market Intelligence</title></head><body><main><h1>Page not found</h1>' +
    `<p>There is no page at <code>${esc}</code>.</p>` +
    `<p>${SITE_PAGES.map((p) => `<a href="${p.href}">${p.label}</a>`).join(' · ')}</p>` +
    '</main></body></html>'
  );
}

/** Fastify's trustProxy from TRUST_PROXY: a list of addresses/CIDRs, or false. */
function trustProxy(v: string | undefined): string[] | false {
  if (!v) return false;
  return v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Builds the Fastify app (not listening): /api/v1 routes with the envelope (one per
 * operation, src/http/routes/v1.ts), OpenAPI at /api/v1/openapi.json, the API reference at
 * /docs (local assets, no CDN), the embedded identity provider's routes when one is given,
 * /healthz and /readyz. The dashboard (`/`, src/web/) is mounted beside it by the server. Every request gets an id (echoed as `X-Request-Id` and in
 * `meta.request_id`), logged with each line. MCP over HTTP is mounted beside it by the server.
 */
export async function buildHttpApp(deps: HttpDeps, identity: EmbeddedIdentity | null): Promise<FastifyInstance> {
  // Read at each response: the live ingest moves the as-of day while the service runs.
  const asOf = () => deps.services.market.asOf;
  const outageLog = deps.outageLog ?? new OutageLog();
  const metrics =
    deps.config.METRICS === 'on'
      ? new HttpMetrics(
          async () => ({ ...(await deps.ready()), redis: deps.redisUp?.() ?? null }),
          () => {
            const st = deps.services.market.status().value;
            return {
              fresh: st.series.length - st.stale_series - st.empty_series,
              stale: st.stale_series,
              empty: st.empty_series,
              signalsUnavailable: deps.services.market.signals(false).value.unavailable.length,
            };
          },
        )
      : null;
  const addressLimits = (ip: string) => deps.access.peek(anonymousCaller(`ip:${rateLimitAddress(ip)}`));
  // Used when the shared limiter does not answer in time for a protocol error: empty, i.e. full quota.
  const fallbackLimiter = new TierRateLimiter(null);
  const app = Fastify({
    loggerInstance: deps.log,
    genReqId: () => randomUUID(),
    // One access-log line per request (onResponse below) instead of Fastify's two.
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    trustProxy: trustProxy(deps.config.TRUST_PROXY),
    // `/account/` and `/api/v1/signals/` are the pages and routes without the slash (a
    // typed or pasted URL), not a 404.
    routerOptions: { ignoreTrailingSlash: true },
    // Errors Fastify raises before routing (bad percent-encoding, a too long path parameter)
    // get the envelope too.
    frameworkErrors: (err, req, reply) => {
      reply.header('X-Request-Id', req.id);
      reply.header('X-Content-Type-Options', 'nosniff');
      const code = (err as { code?: string }).code;
      const message =
        code === 'FST_ERR_BAD_URL'
          ? 'Malformed URL: invalid percent-encoding'
          : code === 'FST_ERR_MAX_PARAM_LENGTH'
            ? 'A path parameter is too long (at most 100 characters)'
            : null;
      if (!message) req.log.error({ err }, 'framework error');
      // Before routing the caller is not identified: the client address's limits (nothing counted).
      void addressLimits(req.ip)
        .then((limits) => {
          reply.headers(rateLimitHeaders(limits));
          if (message) return sendError(req, reply, 400, 'INVALID_PARAMETER', message, undefined, asOf);
          return sendError(req, reply, 500, 'INTERNAL_ERROR', 'Internal server error', undefined, asOf);
        })
        .catch((e: unknown) => {
          req.log.error({ err: loggableError(e) }, 'framework error response failed');
          if (!reply.sent) reply.raw.destroy();
        });
    },
    // Requests the HTTP parser refuses (431, bad bytes) get the envelope too: src/http/client-error.ts.
    clientErrorHandler: createClientErrorHandler({
      log: deps.log,
      asOf,
      limits: (address) => addressLimits(address),
      fallbackLimits: (address) => fallbackLimiter.peek(`ip:${rateLimitAddress(address)}`, 'unauthenticated'),
      maxHeaderSize,
      onAnswer: (status) => metrics?.observe('UNKNOWN', PROTOCOL_ERROR, status, 0),
    }),
    // The pino Logger type is wider than Fastify's base logger type; the app is typed as the default instance.
  }) as unknown as FastifyInstance;

  // Bodies are JSON only. A JSON Content-Type with an empty body is no body on a method that
  // takes none (many clients send the header on every DELETE); elsewhere it is refused with a
  // message saying what to send (bodyErrorMessage). Parsing is Fastify's own (prototype
  // poisoning refused). text/plain is not parsed: a JSON document sent as text gets the
  // unsupported media type message instead of a confusing "expected object, received string".
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const noBody = (req: FastifyRequest, body: string | Buffer) => body.length === 0 && BODYLESS_METHODS.has(req.method);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) =>
    noBody(req, body) ? done(null, undefined) : jsonParser(req, body as string, done),
  );
  // Any other type: no body when empty on a body-less method, else unsupported (the message
  // above). Scopes with their own parsers (/auth) are not affected.
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) =>
    noBody(req, body) ? done(null, undefined) : done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), undefined),
  );
  app.setValidatorCompiler(bodyOptionalAware);
  // A JSON body `null` on a route whose body is optional is refused as on the others (it is
  // not an object; only a request with no body at all is no body): the same 400 the schema
  // validation answers for `null` where a body is needed (bodyOptionalAware cannot tell them apart).
  const refuseNullBody: preValidationHookHandler = (req, reply, done) => {
    if (req.body !== null) return done();
    sendError(
      req,
      reply,
      400,
      'INVALID_PARAMETER',
      wholeBodyMessage('invalid_type', 'expected object, got null'),
      { location: 'body', field: 'body' },
      asOf,
    );
  };
  app.addHook('onRoute', (route) => {
    if (!allowsNoBody(route.schema?.body)) return;
    const own = route.preValidation;
    route.preValidation = own === undefined ? refuseNullBody : [refuseNullBody, ...(Array.isArray(own) ? own : [own])];
  });
  // Handlers send pre-serialized JSON strings; objects (if any) are plain JSON.stringify'd.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  // Synchronous hooks (done callback): no promise per request on the hot path.
  // `nosniff` on every answer (JSON, errors, MCP, pages): a browser never reads an API answer
  // as HTML or script whatever its bytes (OWASP REST Security Cheat Sheet, "Security headers").
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('X-Request-Id', req.id);
    reply.header('X-Content-Type-Options', 'nosniff');
    done();
  });
  // Access log: method, path (no query string, which could carry secrets, and no API key pasted
  // into the path: loggedPath), status, time, tier,
  // and who called: the key's id (as GET /api/v1/keys lists it; never the key) or the
  // signed-in user's id, so an operator can tell which key made which requests.
  app.addHook('onResponse', (req, reply, done) => {
    const c = req.caller;
    req.log.info(
      {
        method: req.method,
        path: loggedPath(req.url),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        tier: c?.tier,
        key_id: c?.kind === 'key' ? c.keyId : undefined,
        user_id: c?.kind === 'jwt' ? c.userId : undefined,
        ip: req.ip,
      },
      'request completed',
    );
    done();
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ServiceError) {
      if (err.status >= 500) req.log[err.expected ? 'warn' : 'error']({ err: loggableError(err) }, 'service error');
      return sendServiceError(req, reply, err, asOf);
    }
    if (err.validation) {
      const where = LOCATION_NOUN[err.validationContext ?? ''] ?? 'parameter';
      const first = err.validation[0];
      const params = first?.params as { missingProperty?: string; keys?: string[] } | undefined;
      // An undeclared query parameter (closedObject): its message names it and the accepted
      // ones. (Strict bodies keep the form below: the path of the object, then zod's message.)
      const unknown = first?.keyword === 'unrecognized_keys' && err.validationContext === 'querystring';
      const path = first?.instancePath?.replace(/^\//, '').replace(/\//g, '.') ?? '';
      // An undeclared field of a strict body: named with its path, like any other bad field.
      const extra = first?.keyword === 'unrecognized_keys' && !unknown ? params?.keys?.[0] : undefined;
      const named =
        (unknown ? params?.keys?.[0] : extra !== undefined ? (path ? `${path}.${extra}` : extra) : path || params?.missingProperty) ?? '';
      // The body as a whole was refused (an array, a string, a number: no field to name): `body`.
      const wholeBody = named === '' && err.validationContext === 'body';
      const field = wholeBody ? 'body' : named;
      // A query parameter given twice (?days=30&days=30) arrives as an array: say that, not
      // that the value is malformed (read only here, when validation failed: no cost otherwise).
      const repeated = err.validationContext === 'querystring' ? (req.query as Record<string, unknown> | undefined)?.[field] : undefined;
      const message = Array.isArray(repeated)
        ? `Invalid query parameter '${field}': given ${repeated.length} times; give it once`
        : unknown
          ? first.message!
          : extra !== undefined
            ? `Unknown ${where} '${field}': remove it (the API reference at /docs lists the fields this route takes)`
            : wholeBody
              ? wholeBodyMessage(first?.keyword, first?.message)
              : fieldMessage(where, field, first?.message ?? 'invalid value');
      return sendError(req, reply, 400, 'INVALID_PARAMETER', message, { location: err.validationContext, field }, asOf);
    }
    // @fastify/static refuses a path that leaves its folder (e.g.
    // /app/static/../../package.json) with 403 FST_STATIC_FORBIDDEN_PATH "Forbidden": no such
    // route, as for any other path.
    if (err.code === 'FST_STATIC_FORBIDDEN_PATH') return notFound(req, reply);
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      // Fastify's own client errors (malformed JSON, wrong content type, body too large): 400
      // INVALID_PARAMETER like every malformed value (docs/architecture.md, errors), with a
      // message that says what to send.
      const body = bodyErrorMessage(
        err.code,
        req.headers['content-type'],
        // Fastify always fills initialConfig.bodyLimit (1 MiB by default).
        req.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit!,
      );
      return sendError(req, reply, 400, 'INVALID_PARAMETER', body ?? err.message, body ? { location: 'body' } : undefined, asOf);
    }
    const e = unexpectedError(err);
    if (e.code === 'SERVICE_UNAVAILABLE') outageLog.error(req.log, loggableError(err), 'dependency unavailable');
    else req.log.error({ err: loggableError(err) }, 'unhandled error');
    return sendServiceError(req, reply, e, asOf);
  });

  metrics?.install(app);

  /**
   * The methods a path takes when the request's method is not one of them (`POST
   * /api/v1/regime`): the 404 then says which to use, instead of suggesting the route is missing.
   */
  const otherMethods = (req: FastifyRequest): string[] => {
    const url = pathOf(req.url);
    return ROUTE_METHODS.filter((method) => method !== req.method && app.findRoute({ method, url }) !== null);
  };
  /** An Allow header's value for `methods`: HEAD beside GET (every GET route answers HEAD, RFC 9110 section 9.3.2). */
  const allowOf = (methods: readonly string[]) => methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
  const notFound = (req: FastifyRequest, reply: FastifyReply) => {
    if (isPageNavigation(req))
      return pageHeaders(reply.code(404).type('text/html; charset=utf-8'), NOT_FOUND_CSP)
        .header('cache-control', 'no-store')
        .header('x-request-id', req.id)
        .send(notFoundPage(pathOf(req.url)));
    const methods = otherMethods(req);
    if (methods.length > 0) reply.header('allow', allowOf(methods));
    return sendError(
      req,
      reply,
      404,
      'NOT_FOUND',
      methods.length > 0
        ? `Route ${req.method} ${pathOf(req.url)} not found: this path takes ${methods.join(' or ')}, not ${req.method} (the API reference at /docs lists every route and its methods)`
        : `Route ${req.method} ${pathOf(req.url)} not found: the API reference at /docs lists every route and its methods`,
      undefined,
      asOf,
    );
  };
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
        { name: 'status', description: 'Freshness of the market data (free, unmetered)' },
        { name: 'keys', description: 'Self-service API keys (JWT of a signed-in user)' },
        { name: 'theses', description: 'Theses and their health (owner only)' },
      ],
      components: {
        securitySchemes: {
          bearerApiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'API key `svc_live_...`; optional on public routes (tier unauthenticated without it)',
          },
          bearerJwt: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'JWT of a signed-in user from the identity provider (sign in at /signin)',
          },
        },
      },
      security: [{ bearerApiKey: [] }, {}],
    },
    // Named component schemas, shared error responses and headers, examples: src/http/openapi.ts, docs/openapi.md.
    transform: openApiTransform,
    transformObject: openApiTransformObject(OPERATIONS),
  });
  await app.register(async (docs) => {
    // Swagger UI's page has no viewport meta (the plugin has no option for it), so phones
    // showed it zoomed out to a desktop width: added to its HTML here, in this context only.
    docs.addHook('onSend', async (_req, reply, payload) =>
      typeof payload === 'string' && String(reply.getHeader('content-type')).startsWith('text/html')
        ? payload.replace(
            '<meta charset="UTF-8">',
            '<meta charset="UTF-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">',
          )
        : payload,
    );
    // The same framing and sniffing protection as the dashboard's pages, and a CSP: scripts,
    // fetches, images and fonts from this origin only. Swagger UI sets inline styles as it
    // renders (the one allowance). The plugin's own `staticCSP` is not used: it adds
    // upgrade-insecure-requests, which breaks the page on a plain-HTTP deployment.
    docs.addHook('onRequest', (_req, reply, done) => {
      pageHeaders(reply, DOCS_CSP);
      done();
    });
    await docs.register(fastifySwaggerUi, {
      routePrefix: '/docs',
      uiConfig: { url: '/api/v1/openapi.json' } as never,
      theme: { title: 'Market Intelligence API: reference' },
    });
  });

  const guard = createGuard(deps.access, asOf, metrics ? (d) => metrics.decision(d) : undefined, undefined, outageLog);
  const origins = deps.config.CORS_ORIGINS.trim();
  await app.register(
    async (v1) => {
      // An OPTIONS that is not a CORS preflight (no Origin or no Access-Control-Request-Method,
      // e.g. `curl -X OPTIONS`) asks which methods the path takes (RFC 9110 section 9.3.7): 204
      // with Allow, before @fastify/cors, which would answer a plain-text 400 "Invalid Preflight
      // Request" outside the envelope. A path no route takes gets the envelope's 404 with the
      // client address's rate-limit headers (as errors before routing). No quota used.
      v1.addHook('onRequest', (req, reply, done) => {
        if (!isPlainOptions(req)) return done();
        const methods = otherMethods(req);
        if (methods.length > 0) {
          reply
            .code(204)
            .header('allow', `${allowOf(methods)}, OPTIONS`)
            .header('cache-control', 'no-store')
            .send();
          return;
        }
        addressLimits(req.ip)
          .then((limits) => {
            notFound(req, reply.headers(rateLimitHeaders(limits)));
          })
          .catch(done);
      });
      // CORS before the guard: a preflight is answered without touching the quota. No
      // credentials mode: keys and JWTs travel in the Authorization header, never in cookies.
      await v1.register(fastifyCors, {
        origin: origins === '*' ? '*' : origins.split(',').map((o) => o.trim()),
        methods: ['GET', 'HEAD', 'POST', 'DELETE'],
        allowedHeaders: ['Authorization', 'Content-Type', 'If-None-Match'],
        // One string: the plugin would join a list on every request.
        exposedHeaders: EXPOSED_HEADERS.join(', '),
        credentials: false,
        maxAge: 600,
      });
      // gzip / brotli (quality 4) / deflate for answers over 1 KB, by Accept-Encoding.
      await v1.register(fastifyCompress, { encodings: ['br', 'gzip', 'deflate'], threshold: 1024 });
      v1.addHook('onRequest', guard);
      // Its own handler so unknown /api/v1 routes pass the guard (rate-limit headers).
      v1.setNotFoundHandler(notFound);
      // With a weak ETag and 304 (it changes only with the build): src/http/caching.ts.
      v1.get(
        '/openapi.json',
        { schema: { hide: true }, config: { policy: PUBLIC_UNMETERED } },
        openApiDocumentHandler(() => app.swagger()),
      );
      await v1.register(v1Routes, { services: deps.services, asOf });
    },
    { prefix: '/api/v1' },
  );

  if (identity) await identityRoutes(app, identity, deps.limiter);

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    const checks = await deps.ready();
    const failed = Object.entries(checks)
      .filter(([, ok]) => !ok)
      .map(([name]) => name);
    const ready = failed.length === 0;
    return reply
      .code(ready ? 200 : 503)
      .send({ status: ready ? 'ok' : 'unavailable', checks, ...(ready ? {} : { failed }), as_of: asOf() });
  });

  return app;
}
