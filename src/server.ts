import type { FastifyInstance } from 'fastify';
import type { EmbeddedIdentity } from './auth/identity.ts';
import { createJwtVerifier } from './auth/jwt.ts';
import { embeddedAuthSecret } from './auth/secret.ts';
import type { Config } from './config.ts';
import { type Core, createCore, prepareCore } from './core.ts';
import { buildHttpApp } from './http/app.ts';
import { hostName, mcpRoutes } from './mcp/http.ts';
import { pingDatabase } from './store/db.ts';

/** The HTTP service: the core, the embedded identity provider (when used) and the Fastify app (not listening yet). */
export interface Service extends Core {
  app: FastifyInstance;
  /** The embedded identity provider, or null with an external one (AUTH_ISSUER). */
  identity: EmbeddedIdentity | null;
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
 * Builds the HTTP service from a config: the core (src/core.ts), then the identity provider
 * (the embedded one unless AUTH_ISSUER names an external one), then the HTTP app with REST,
 * the identity routes and MCP at /mcp; runs the signal-history backfill job (skipped when
 * already done). Stopping closes the app, then the core.
 * @param opts.publicUrl the service's public origin (default PUBLIC_URL, else http://HOST:PORT).
 */
export async function createService(
  config: Config,
  opts: { logStream?: NodeJS.WritableStream; publicUrl?: string } = {},
): Promise<Service> {
  // A missing AUTH_SECRET is a configuration error: reported before anything is opened.
  const secret = config.AUTH_ISSUER ? null : embeddedAuthSecret(config);
  const core = await createCore(config, { logStream: opts.logStream });
  let app: FastifyInstance | null = null;
  try {
    const publicUrl = (opts.publicUrl ?? config.PUBLIC_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
    let identity: EmbeddedIdentity | null = null;
    if (secret) {
      const { createEmbeddedIdentity } = await import('./auth/identity.ts');
      identity = await createEmbeddedIdentity({
        db: core.database.db,
        baseUrl: publicUrl,
        secret,
        audience: config.AUTH_AUDIENCE,
        log: core.log,
      });
      core.access.useJwtVerifier(createJwtVerifier({ issuer: identity.issuer, audience: identity.audience, jwks: identity.jwks }));
    }
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
      });
    });
    await prepareCore(core);
    return {
      ...core,
      app: http,
      identity,
      async stop() {
        await http.close();
        await core.stop();
      },
    };
  } catch (err) {
    await app?.close().catch(() => {});
    await core.stop().catch(() => {});
    throw err;
  }
}
