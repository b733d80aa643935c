#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { createService } from './server.ts';
import { PLAN_TIERS } from './auth/tiers.ts';
import { DatabaseInUseError, openDatabase } from './store/db.ts';
import { ServiceError } from './http/errors.ts';
import { UserRepo } from './store/user-repo.ts';

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
    await runStdio(cfg, process.env[STDIO_KEY_ENV] || undefined);
    return;
  }
  if (cmd === 'backfill') {
    const svc = await createService({ ...cfg, LOG_LEVEL: cfg.LOG_LEVEL });
    await svc.stop();
    return;
  }
  if (cmd === 'users' && positionals[1] === 'set-tier') {
    const [email, tier] = positionals.slice(2);
    const plan = PLAN_TIERS.find((t) => t === tier);
    if (!email || !plan) {
      process.stderr.write(`Usage: npm run cli -- users set-tier EMAIL ${PLAN_TIERS.join('|')}\n`);
      process.exit(2);
    }
    const db = await openDatabase({ databaseUrl: cfg.DATABASE_URL, pgliteDir: cfg.PGLITE_DIR });
    try {
      const n = await new UserRepo(db.db).setTierByEmail(email, plan);
      if (n === 0) {
        process.stderr.write(`No user with email ${email} (a user appears after their first key creation or thesis).\n`);
        process.exitCode = 1;
      } else process.stdout.write(`${email}: tier set to ${tier}\n`);
    } finally {
      await db.close();
    }
    return;
  }
  process.stderr.write(`Unknown command '${cmd}'.\n\n${USAGE}`);
  process.exit(2);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof DatabaseInUseError || err instanceof ServiceError || err instanceof RangeError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`${(err as Error).message}\n`);
  } else {
    process.stderr.write(`Failed to start: ${(err as Error)?.stack ?? String(err)}\n`);
  }
  process.exit(1);
});
