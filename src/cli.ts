#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { PLAN_TIERS } from './auth/tiers.ts';
import { type Config, ConfigError, loadConfig } from './config.ts';
import { createCore, prepareCore } from './core.ts';
import { ServiceError } from './errors.ts';
import { DatabaseInUseError } from './store/db.ts';

const USAGE = `Usage: npm run cli -- <command> [options]

Commands:
  serve                 Run the HTTP service (REST /api/v1, /docs) — what \`npm start\` does
  mcp --stdio           Serve the six MCP tools over stdio for local clients; the API key
                        comes from MARKET_INTEL_API_KEY (unset = unauthenticated tier)
  backfill              Compute and store the signal history, then exit
  users set-tier EMAIL TIER
                        Set a user's plan (free | pro | api); every key of the user reports it

Options (each overrides the environment variable of the same name):
  --as-of YYYY-MM-DD    Serve the state as of this UTC day (AS_OF)
  --port N              Port (PORT)
  --host ADDR           Interface (HOST)
  --data-dir DIR        Dataset folder (DATA_DIR)
`;

function config(values: Record<string, string | boolean | undefined>): Config {
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const overrides: Partial<Record<keyof Config, string>> = {};
  if (str('as-of')) overrides.AS_OF = str('as-of');
  if (str('port')) overrides.PORT = str('port');
  if (str('host')) overrides.HOST = str('host');
  if (str('data-dir')) overrides.DATA_DIR = str('data-dir');
  return loadConfig(process.env, overrides);
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    strict: true,
    options: {
      'as-of': { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'data-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      stdio: { type: 'boolean' },
    },
  });
  const cmd = positionals[0] ?? 'serve';
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const cfg = config(values);
  if (cmd === 'serve') {
    // Only `serve` loads the HTTP stack (Fastify, the identity provider).
    const { createService } = await import('./server.ts');
    const svc = await createService(cfg);
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      svc.app.log.info({ signal }, 'shutting down');
      await svc.stop();
      process.exit(0);
    };
    process.on('SIGINT', () => void stop('SIGINT'));
    process.on('SIGTERM', () => void stop('SIGTERM'));
    await svc.app.listen({ port: cfg.PORT, host: cfg.HOST });
    svc.app.log.info({ as_of: svc.market.asOf, database: svc.database.kind }, 'market-intelligence service ready');
    return;
  }
  if (cmd === 'mcp') {
    if (!values.stdio) {
      process.stderr.write('The HTTP MCP server runs inside `npm start` at /mcp; for stdio use: npm run cli -- mcp --stdio\n');
      process.exit(2);
    }
    const { runStdio, STDIO_KEY_ENV } = await import('./mcp/stdio.ts');
    // stdout carries the protocol: logs go to stderr.
    const core = await createCore(cfg, { logStream: process.stderr });
    try {
      await prepareCore(core);
      await runStdio(
        { services: core, access: core.access, log: core.log, asOf: core.market.asOf, onClose: () => core.stop() },
        process.env[STDIO_KEY_ENV] || undefined,
      );
    } catch (err) {
      await core.stop().catch(() => {});
      throw err;
    }
    return;
  }
  if (cmd === 'backfill') {
    const core = await createCore(cfg);
    try {
      await prepareCore(core);
    } finally {
      await core.stop();
    }
    return;
  }
  if (cmd === 'users' && positionals[1] === 'set-tier') {
    const [email, tier] = positionals.slice(2);
    const plan = PLAN_TIERS.find((t) => t === tier);
    if (!email || !plan) {
      process.stderr.write(`Usage: npm run cli -- users set-tier EMAIL ${PLAN_TIERS.join('|')}\n`);
      process.exit(2);
    }
    const core = await createCore(cfg);
    try {
      // Through KeyService, so cached key look-ups of this process are evicted too.
      const n = await core.keys.setTier(email, plan);
      if (n === 0) {
        process.stderr.write(`No user with email ${email} (a user appears after their first key creation or thesis).\n`);
        process.exitCode = 1;
      } else process.stdout.write(`${email}: tier set to ${plan}\n`);
    } finally {
      await core.stop();
    }
    return;
  }
  process.stderr.write(`Unknown command '${cmd}'.\n\n${USAGE}`);
  process.exit(2);
}

main().catch((err: unknown) => {
  if (
    err instanceof ConfigError ||
    err instanceof DatabaseInUseError ||
    err instanceof ServiceError ||
    err instanceof RangeError ||
    (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
  ) {
    process.stderr.write(`${(err as Error).message}\n`);
  } else {
    process.stderr.write(`Failed to start: ${(err as Error)?.stack ?? String(err)}\n`);
  }
  process.exit(1);
});
