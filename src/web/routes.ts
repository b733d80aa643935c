import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyCompress from '@fastify/compress';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PASSWORD_RULES } from '../auth/password-policy.ts';
import { TIER_LIMITS } from '../auth/tiers.ts';
import { ROOT_DIR } from '../config.ts';
import type { OutageLog } from '../errors.ts';
import { REGIME_ORDER, THESIS_METRICS } from '../engine/thesis.ts';
import { SIGNAL_LEVELS } from '../engine/types.ts';
import type { AsOf } from '../http/envelope.ts';
import { createGuard } from '../http/guard.ts';
import { SIGN_UP_NAME_MAX } from '../http/identity.ts';
import { pageHeaders } from '../http/page-headers.ts';
import { v1Routes } from '../http/routes/v1.ts';
import { type Access, DASHBOARD_REQUESTS_PER_MINUTE, dashboardPolicy } from '../services/access.ts';
import { MAX_ACTIVE_KEYS } from '../services/keys.ts';
import type { Operation, Services } from '../services/operation.ts';
import { DASHBOARD_CSP, dashboardHtml, type PageConfig } from './page.ts';

/** The dashboard's own files (ES modules and CSS, no build step; served from src/ also when the server runs from dist/). */
export const STATIC_DIR = join(ROOT_DIR, 'src', 'web', 'static');

/**
 * The folder of TradingView's lightweight-charts builds in node_modules (the package is a
 * pinned dependency); only its standalone production build is served, at
 * `/app/vendor/lightweight-charts.standalone.production.js`.
 */
const CHARTS_DIR = dirname(fileURLToPath(import.meta.resolve('lightweight-charts')));
export const CHARTS_FILE = 'lightweight-charts.standalone.production.js';

/** The page paths the dashboard answers (all serve the same document; app.js renders by path). */
const PAGES = ['/', '/asset/:asset', '/chains', '/track-record', '/account', '/signin'];

/** The operations the dashboard reads through `/app/data` (the read-only market questions, not keys or theses). */
export const DASHBOARD_OPERATIONS = (op: Operation) => op.tag !== 'keys' && op.tag !== 'theses';

/** What the dashboard routes need. */
export interface WebDeps {
  services: Services;
  access: Access;
  /** The service's as-of day (meta of the data answers). */
  asOf: AsOf;
  /** `embedded` when the embedded identity provider serves /auth (sign-in here); else the external issuer's URL. */
  signIn: { kind: 'embedded' } | { kind: 'external'; issuer: string };
  /** The MCP endpoint's URL as clients should use it (the configuration snippet). */
  mcpUrl: string;
  /** The log of dependency outages, shared with REST and MCP (one line per 10 s, not per request). */
  outageLog?: OutageLog;
}

/**
 * Mounts the web dashboard (docs/architecture.md, "Web dashboard"):
 * - the pages `/`, `/asset/:asset`, `/chains`, `/track-record`, `/account` and `/signin`: one HTML document
 *   with a strict CSP (scripts, styles and fetches from this origin only; no CDN, no external
 *   fonts), rendered by `/app/static/app.js`;
 * - `/app/static/*` (the dashboard's ES modules and CSS) and the lightweight-charts build at
 *   `/app/vendor/`, with @fastify/static, compressed;
 * - `/app/data/*`: the read-only market routes of /api/v1 registered again (the same route
 *   lines and operations, src/http/routes/v1.ts), left out of the OpenAPI document and
 *   guarded with `dashboardPolicy`: not counted against the API quota, but against a
 *   per-address dashboard budget (DASHBOARD_REQUESTS_PER_MINUTE).
 * Key management and theses are not here: the page calls /api/v1 with the user's JWT, under
 * the API's own rules.
 */
export async function webRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  const config: Omit<PageConfig, 'today'> = {
    signIn: deps.signIn.kind === 'embedded' ? 'embedded' : deps.signIn.issuer,
    mcpUrl: deps.mcpUrl,
    maxKeys: MAX_ACTIVE_KEYS,
    tiers: TIER_LIMITS,
    dashboardPerMinute: DASHBOARD_REQUESTS_PER_MINUTE,
    nameMax: SIGN_UP_NAME_MAX,
    passwordRules: PASSWORD_RULES,
    signalLevels: SIGNAL_LEVELS,
    // Strongest first, like the signal levels: bull, neutral, bear.
    regimeLevels: [...REGIME_ORDER].reverse(),
    thesisMetrics: THESIS_METRICS,
    // Offline the as-of day is the bundled dataset's last day and never moves.
    dataMode: deps.services.market.mode,
    dataAsOf: deps.services.market.mode === 'offline' ? deps.services.market.asOf : null,
  };
  // The document names the server's UTC day (PageConfig.today): made again when the day changes.
  let html = { day: '', text: '' };
  const htmlOf = (day: string) => {
    if (html.day !== day) html = { day, text: dashboardHtml({ ...config, today: day }) };
    return html.text;
  };
  // An asset page for an asset the service does not know is a 404 (the page still renders,
  // and says so), like any other page that does not exist.
  const page = (req: FastifyRequest, reply: FastifyReply) => {
    reply
      .code(
        (req.params as { asset?: string }).asset !== undefined &&
          !deps.services.market.isKnownAsset((req.params as { asset: string }).asset)
          ? 404
          : 200,
      )
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-cache');
    return pageHeaders(reply, DASHBOARD_CSP).send(htmlOf(new Date().toISOString().slice(0, 10)));
  };

  await app.register(async (web) => {
    await web.register(fastifyCompress, { encodings: ['br', 'gzip', 'deflate'], threshold: 1024 });
    for (const url of PAGES) web.get(url, { schema: { hide: true } }, page);
    await web.register(fastifyStatic, {
      root: STATIC_DIR,
      prefix: '/app/static/',
      maxAge: 300_000,
      index: false,
      setHeaders: (res) => res.header('x-content-type-options', 'nosniff'),
    });
    await web.register(fastifyStatic, {
      root: CHARTS_DIR,
      prefix: '/app/vendor/',
      decorateReply: false,
      index: false,
      maxAge: 86_400_000,
      allowedPath: (pathName) => pathName === `/${CHARTS_FILE}`,
    });
    await web.register(
      async (data) => {
        data.addHook('onRequest', createGuard(deps.access, deps.asOf, undefined, dashboardPolicy, deps.outageLog));
        await v1Routes(data, { services: deps.services, asOf: deps.asOf, only: DASHBOARD_OPERATIONS, hide: true });
      },
      { prefix: '/app/data' },
    );
  });
}
