import type { FastifyInstance } from 'fastify';
import { isIPv6 } from 'node:net';
import { adminSocketPath, startAdminChannel } from './admin/channel.ts';
import { lazyIdentity, type LazyIdentity } from './auth/identity-lazy.ts';
import type { JWTVerifyGetKey } from 'jose';
import type { Logger } from 'pino';
import { IdentityProviderUnavailableError, type JwtCheck, SessionEndedError } from './auth/jwt-check.ts';
import { embeddedAuthSecret } from './auth/secret.ts';
import type { Config } from './config.ts';
import { memoRetrying, OutageLog } from './errors.ts';
import { type Core, createCore, logPhase, prepareCore, stopPoint } from './core.ts';
import { buildHttpApp } from './http/app.ts';
import { hostName, mcpRoutes } from './mcp/http.ts';
import { webRoutes } from './web/routes.ts';
import { pingDatabase } from './store/db.ts';

/** The HTTP service: the core, the embedded identity provider (when used) and the Fastify app (not listening yet). */
export interface Service extends Core {
  app: FastifyInstance;
  /** The embedded identity provider (created on first use or once listening), or null with an external one (AUTH_ISSUER). */
  identity: LazyIdentity | null;
}

/** How long one /readyz check may take before it counts as failed, ms (README, "Dependencies and timeouts"). */
export const READY_CHECK_TIMEOUT_MS = 800;

/** Resolves to `check()`'s result, or to false when it throws or takes more than `ms` milliseconds. */
async function bounded(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([check().catch(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The embedded provider's JWT check, with JOSE (src/auth/jwt.ts) imported on the first token
 * to verify rather than at start-up (a token only exists after a sign-in). A failed import
 * is not kept: the next token tries again. A valid token that names its sign-in session
 * (`sid`, src/auth/identity.ts) is refused with SessionEndedError once that session has ended
 * (`sessionActive` false: signed out, revoked, expired), so a sign-out ends the JWTs taken
 * from it at once rather than when they expire (IDP_JWT_TTL). A token without `sid` (issued
 * before it was added) keeps its expiry. The session look-up failing (database unreachable)
 * is IdentityProviderUnavailableError: 503, not the token's fault.
 */
function lazyJwtVerifier(
  opts: { issuer: string; audience: string; jwks: JWTVerifyGetKey },
  sessionActive: (sid: string, userId: string) => Promise<boolean>,
): JwtCheck {
  const check = memoRetrying(() => import('./auth/jwt.ts').then((m) => m.createJwtVerifier(opts)));
  return {
    verify: async (token) => {
      const claims = await check().then((c) => c.verify(token));
      if (claims.sid === null) return claims;
      let open: boolean;
      try {
        open = await sessionActive(claims.sid, claims.sub);
      } catch (err) {
        // The database's error goes with it: the guard logs it (once per 10 s during an outage).
        throw new IdentityProviderUnavailableError('The identity provider could not check the sign-in session', { cause: err });
      }
      if (!open) throw new SessionEndedError('The sign-in session of this token has ended');
      return claims;
    },
  };
}

/** Host names /mcp accepts besides loopback: PUBLIC_URL's host and MCP_ALLOWED_HOSTS. */
function mcpAllowedHosts(config: Config, publicUrl: string): string[] {
  const out = (config.MCP_ALLOWED_HOSTS ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  const h = hostName(publicUrl);
  if (h) out.push(h);
  return out;
}

/**
 * Builds the HTTP service from a config: the core (src/core.ts), the identity provider (the
 * embedded one, created on first use or once the app listens, unless AUTH_ISSUER names an
 * external one), then the HTTP app with REST, the identity routes and MCP at /mcp; runs the
 * signal-history backfill job (skipped when already done). Stopping waits for an identity
 * provider being created, then closes the app, then the core.
 * @param opts.log the process's logger (default: a synchronous one to `opts.logStream` or
 *   stdout; `serve` passes an asynchronous one, src/logger.ts); `opts.logStream` is ignored
 *   when it is given.
 * @param opts.publicUrl the service's public origin (default PUBLIC_URL, else http://HOST:PORT).
 * @param opts.clock the wall clock of the live mode (default the system clock; tests set it).
 * @param opts.ingestSchedule false: live mode without the ingest schedule (no round at start,
 *   none on the clock, and no reload on another instance's notice), for tests of one instance
 *   that run rounds themselves (`ingest.once`), which a scheduled round could overlap. Default true.
 * @param opts.signal ends the start-up between its phases once aborted (createCore's `signal`;
 *   also checked before the backfill): everything opened is closed and its reason thrown.
 */
export async function createService(
  config: Config,
  opts: {
    logStream?: NodeJS.WritableStream;
    log?: Logger;
    publicUrl?: string;
    clock?: () => Date;
    ingestSchedule?: boolean;
    signal?: AbortSignal;
  } = {},
): Promise<Service> {
  // A missing AUTH_SECRET is a configuration error: reported before anything is opened.
  const secret = config.AUTH_ISSUER ? null : embeddedAuthSecret(config);
  const core = await createCore(config, { logStream: opts.logStream, log: opts.log, clock: opts.clock, signal: opts.signal });
  let app: FastifyInstance | null = null;
  let closeAdmin: (() => Promise<void>) | null = null;
  try {
    const host = isIPv6(config.HOST) ? `[${config.HOST}]` : config.HOST;
    const publicUrl = (opts.publicUrl ?? config.PUBLIC_URL ?? `http://${host}:${config.PORT}`).replace(/\/$/, '');
    let identity: LazyIdentity | null = null;
    const t = performance.now();
    if (secret) {
      // Created on first use, or when the server listens (`warm` below): better-auth is not
      // needed to become ready (src/auth/identity-lazy.ts).
      identity = lazyIdentity({ baseUrl: publicUrl, audience: config.AUTH_AUDIENCE, log: core.log }, async () => {
        const t0 = performance.now();
        const { createEmbeddedIdentity } = await import('./auth/identity.ts');
        const real = await createEmbeddedIdentity({
          db: core.database.db,
          jobsDb: core.database.jobs,
          baseUrl: publicUrl,
          secret,
          audience: config.AUTH_AUDIENCE,
          log: core.log,
          sharedDatabase: core.database.kind === 'postgres',
        });
        logPhase(core.log, 'identity', 'embedded identity provider ready', t0, { issuer: real.issuer });
        return real;
      });
      core.access.useJwtVerifier(
        lazyJwtVerifier({ issuer: identity.issuer, audience: identity.audience, jwks: identity.jwks }, (sid, userId) =>
          core.repos.users.sessionActive(sid, userId),
        ),
      );
    }
    // One log of dependency outages for REST, MCP and the dashboard: a line per 10 s, not per request.
    const outageLog = new OutageLog();
    const http = await buildHttpApp(
      {
        config,
        log: core.log,
        services: core,
        access: core.access,
        limiter: core.limiter,
        ready: async () => ({
          database: await bounded(() => pingDatabase(core.database.db), READY_CHECK_TIMEOUT_MS),
          data: core.market.signalSeries.size > 0,
        }),
        redisUp: () => (core.redis ? core.redis.status === 'ready' : null),
        outageLog,
      },
      identity,
    );
    app = http;
    await http.register(async (scope) => {
      await mcpRoutes(scope, {
        services: core,
        access: core.access,
        limiter: core.limiter,
        allowedHosts: mcpAllowedHosts(config, publicUrl),
        outageLog,
      });
    });
    await webRoutes(http, {
      services: core,
      access: core.access,
      asOf: () => core.market.asOf,
      signIn: identity ? { kind: 'embedded' } : { kind: 'external', issuer: config.AUTH_ISSUER ?? '' },
      mcpUrl: `${publicUrl}/mcp`,
      outageLog,
    });
    logPhase(core.log, 'http', 'HTTP app built (REST, OpenAPI, /docs, /mcp, dashboard)', t);
    // Once listening, the identity provider is created in the background (logged as phase
    // 'identity'), so the first sign-in does not wait for it; stop() waits for it to finish.
    let warming: Promise<void> | null = null;
    let stopping = false;
    if (identity) {
      const idp = identity;
      http.addHook('onListen', (done) => {
        if (!stopping) warming = idp.warm();
        done();
      });
    }
    // On PGlite this process holds the database alone: operator commands (users set-tier) reach it here.
    if (core.database.folder) {
      const socket = adminSocketPath(config.PGLITE_DIR);
      try {
        closeAdmin = await startAdminChannel(socket, async (email, tier) => {
          const users = await core.keys.setTier(email, tier);
          // No email in the log (personal data; the operator's command prints it to the operator).
          core.log.info({ tier, users }, `admin channel: users set-tier to ${tier} (${users} user(s) changed)`);
          return users;
        });
        core.log.info({ socket }, 'admin channel listening (users set-tier while the service runs)');
      } catch (err) {
        core.log.warn({ socket, err: (err as Error).message }, 'admin channel unavailable: stop the service to run users set-tier');
      }
    }
    await stopPoint(opts.signal);
    await prepareCore(core);
    // Live mode: the first round starts now, in the background (the service answers on the data it has meanwhile).
    if (opts.ingestSchedule !== false) core.ingest?.start();
    const close = closeAdmin;
    return {
      ...core,
      app: http,
      identity,
      async stop() {
        stopping = true;
        await close?.().catch(() => {});
        await warming;
        await http.close();
        await core.stop();
      },
    };
  } catch (err) {
    await closeAdmin?.().catch(() => {});
    await app?.close().catch(() => {});
    await core.stop().catch(() => {});
    throw err;
  }
}
