#!/usr/bin/env node
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Argument, Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { PLAN_TIERS, type PlanTier } from './auth/tiers.ts';
import { type Config, ConfigError, loadConfig, ROOT_DIR } from './config.ts';
import { causes, isDependencyDown, loggableError, SAME_CTRL_C_MS, ServiceError, StartupStopped, unexpectedError } from './errors.ts';
import type { Coordination } from './store/db.ts';
import type { BacktestWindow } from './services/backtest.ts';
// Everything else is imported by the command that needs it (start-up time: `mcp --stdio`
// answers `initialize` before the core's modules are loaded, `--version` loads none).

/*
 * The command line (commander): `serve` (default), `mcp --stdio`, `backfill`, `backtest`,
 * `users set-tier EMAIL TIER`, `help [command]`, `--version`. Usage errors (unknown command or
 * option, missing or invalid argument) exit with code 2, run-time failures with 1.
 */

/** Exit code of a usage error (unknown command or option, bad argument). */
const USAGE_ERROR = 2;

/** The flags every command accepts; each overrides the environment variable of the same name. */
interface GlobalFlags {
  asOf?: string;
  port?: string;
  host?: string;
  dataDir?: string;
}

/** The configuration from the environment, with the command-line flags taking precedence. */
function config(flags: GlobalFlags): Config {
  const overrides: Partial<Record<keyof Config, string>> = {};
  if (flags.asOf) overrides.AS_OF = flags.asOf;
  if (flags.port) overrides.PORT = flags.port;
  if (flags.host) overrides.HOST = flags.host;
  if (flags.dataDir) overrides.DATA_DIR = flags.dataDir;
  return loadConfig(process.env, overrides);
}

const VERSION = (JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { version: string }).version;

/** Writes out what `serve`'s asynchronous log still holds (set once it exists): a failed start's log lines then come before its error. */
let flushServeLog: () => Promise<void> = () => Promise.resolve();

/**
 * What to do about a listen that fails with one of these system error codes (EADDRINUSE: the
 * port is taken; EADDRNOTAVAIL: HOST is no address of this machine; EACCES: a port below 1024
 * without the privilege). main's handler prints `Failed to start: ...` with it, no stack trace.
 */
const LISTEN_REFUSALS: Record<string, (message: string) => string> = {
  EADDRINUSE: (m) => `the port is in use (${m}); set PORT (or --port) to a free port, or stop the other process`,
  EADDRNOTAVAIL: (m) =>
    `HOST is not an address of this machine (${m}); set HOST (or --host) to one of its addresses, 127.0.0.1 for this machine only or 0.0.0.0 for every interface`,
  EACCES: (m) =>
    `this user may not listen on that port (${m}); set PORT (or --port) to 1024 or above, or run with the privilege to bind it`,
};

/** What to do about `err` when it is a failed listen with one of LISTEN_REFUSALS' codes, else null. */
function listenRefusal(err: unknown): string | null {
  const e = err as NodeJS.ErrnoException | undefined;
  const advice = e?.syscall === 'listen' && e.code ? LISTEN_REFUSALS[e.code] : undefined;
  return advice ? advice(e!.message) : null;
}

/**
 * Refuses a port another process listens on before the start-up's slow work (the database, the
 * dataset import), so the user learns it in about a second instead of after the import: binds
 * `host:port` and closes at once. Port 0 (any free port) is not checked. Any other bind error
 * is left to the real listen, which reports it.
 * @throws the bind's error when it is one of LISTEN_REFUSALS (main's handler says what to do).
 */
async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const { createServer } = await import('node:net');
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => (listenRefusal(err) ? reject(err) : resolve()));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

async function serve(cfg: Config): Promise<void> {
  // A port in use is refused before anything slow (checked again by the real listen below).
  await assertPortFree(cfg.HOST, cfg.PORT);
  // Only `serve` loads the HTTP stack (Fastify, the identity provider).
  const [{ createService }, { logPhase, createLogger, flushLogger }] = await Promise.all([import('./server.ts'), import('./core.ts')]);
  // A server logs a line per request: buffered asynchronous writes (src/logger.ts).
  const log = createLogger(cfg.LOG_LEVEL, undefined, { sync: false });
  flushServeLog = () => flushLogger(log);
  // One signal handler for the whole run, registered before the start-up and never removed (a
  // signal that comes while no handler is registered is dropped by Node, and a second SIGTERM
  // would then kill the process mid-close). While the service is starting, a stop ends the
  // start-up at its next phase, the database closed cleanly (createService's `signal`); once
  // it is up, a graceful stop. Both are bounded by SHUTDOWN_TIMEOUT_MS; during either, a second
  // Ctrl+C (SIGINT) exits at once and a repeated SIGTERM (a supervisor sending it again)
  // changes nothing.
  const startup = new AbortController();
  let svc: Awaited<ReturnType<typeof createService>> | null = null;
  let stopping = false;
  let stopSignal: NodeJS.Signals = 'SIGTERM';
  const exitAfterDeadline = (signal: string, why: string) =>
    setTimeout(() => {
      log.error({ signal, timeout_ms: cfg.SHUTDOWN_TIMEOUT_MS }, why);
      void flushServeLog()
        .catch(() => {})
        .finally(() => process.exit(1));
    }, cfg.SHUTDOWN_TIMEOUT_MS);
  /** Stops the service that is up (`svc`), then exits: 0 when its stop finished, 1 when it failed. */
  const stopService = async (service: NonNullable<typeof svc>, signal: string, done: string) => {
    const timer = exitAfterDeadline(
      signal,
      'shutdown did not finish in time (a request or a dependency still held it): exiting now; usage counted since the last flush may be lost (SHUTDOWN_TIMEOUT_MS)',
    );
    try {
      await service.stop();
    } catch (err) {
      log.error({ err: loggableError(err) }, 'shutdown failed');
      await flushServeLog().catch(() => {});
      process.exit(1);
    }
    clearTimeout(timer);
    log.info(done);
    await flushServeLog().catch(() => {});
    process.exit(0);
  };
  let stoppedAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      // The same Ctrl+C again (from npm, which forwards it) is not a second one: SAME_CTRL_C_MS.
      if (signal !== 'SIGINT' || performance.now() - stoppedAt < SAME_CTRL_C_MS) return;
      log.warn({ signal }, 'second Ctrl+C during shutdown: exiting now');
      void flushServeLog()
        .catch(() => {})
        .finally(() => process.exit(1));
      return;
    }
    stopping = true;
    stoppedAt = performance.now();
    stopSignal = signal;
    if (!svc) {
      log.info({ signal, timeout_ms: cfg.SHUTDOWN_TIMEOUT_MS }, 'stopping during start-up: it ends at its next phase');
      startup.abort(new StartupStopped());
      exitAfterDeadline(signal, 'the stop during start-up did not finish in time: exiting now (SHUTDOWN_TIMEOUT_MS)').unref();
      return;
    }
    log.info({ signal, timeout_ms: cfg.SHUTDOWN_TIMEOUT_MS }, 'shutting down');
    void stopService(svc, signal, 'stopped');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    svc = await createService(cfg, { log, signal: startup.signal });
  } catch (err) {
    if (!(err instanceof StartupStopped)) throw err;
    log.info(StartupStopped.LOG_LINE);
    await flushServeLog().catch(() => {});
    process.exit(0);
  }
  // A stop that came while the last phase ran (after its check): the service is up; stop it.
  if (startup.signal.aborted) {
    await stopService(svc, stopSignal, StartupStopped.LOG_LINE);
    return;
  }
  const t = performance.now();
  const address = await svc.app.listen({ port: cfg.PORT, host: cfg.HOST });
  logPhase(svc.log, 'listen', `listening at ${address}`, t, { address });
  // How this instance runs, in one line: what an operator checks first when something is off.
  const rateLimits = !svc.redis
    ? 'memory (this instance only: REDIS_URL unset)'
    : svc.redis.status === 'ready'
      ? 'redis (shared by every instance)'
      : 'memory for now (Redis unavailable; shared again once it answers)';
  const mode = cfg.LIVE ? 'live (ingest on its schedule)' : `offline (the bundled dataset as of ${svc.market.asOf})`;
  const identity = svc.identity ? 'embedded' : `external (${cfg.AUTH_ISSUER})`;
  svc.app.log.info(
    {
      as_of: svc.market.asOf,
      mode: cfg.LIVE ? 'live' : 'offline',
      database: svc.database.kind,
      rate_limits: rateLimits,
      identity,
      address,
    },
    `market-intelligence service ready: ${mode}, database ${svc.database.kind}, rate limits in ${rateLimits}, identity provider ${identity}`,
  );
}

/**
 * MCP over stdio: the transport is connected first, so `initialize` is answered within about
 * a second; the core (database, dataset, series, backfill) is built meanwhile and the tools
 * wait for it (src/mcp/stdio.ts).
 */
async function mcpStdio(cfg: Config): Promise<void> {
  // stdout carries the protocol: logs (start-up progress included) go to stderr.
  const { createLogger } = await import('./logger.ts');
  const log = createLogger(cfg.LOG_LEVEL, process.stderr);
  const { runStdio, STDIO_KEY_ENV } = await import('./mcp/stdio.ts');
  // SIGTERM or SIGINT during the start-up ends it at its next phase (runStdio aborts this).
  const startup = new AbortController();
  const core = (async () => {
    // Let the transport read and answer `initialize` before the start-up's work takes the event loop.
    await new Promise((r) => setTimeout(r, 50));
    const coreModule = await import('./core.ts');
    await coreModule.stopPoint(startup.signal);
    const c = await coreModule.createCore(cfg, { log, signal: startup.signal });
    try {
      await coreModule.stopPoint(startup.signal);
      await coreModule.prepareCore(c);
    } catch (err) {
      await c.stop().catch(() => {});
      throw err;
    }
    const database = cfg.DATABASE_URL ? 'DATABASE_URL' : `PGLITE_DIR=${cfg.PGLITE_DIR}`;
    return { services: c, access: c.access, log: c.log, asOf: c.market.asOf, database, onClose: () => c.stop() };
  })();
  await runStdio(core, process.env[STDIO_KEY_ENV] || undefined, log, { shutdownTimeoutMs: cfg.SHUTDOWN_TIMEOUT_MS, startup });
}

async function backfill(cfg: Config): Promise<void> {
  const { createCore, prepareCore } = await import('./core.ts');
  const core = await createCore(cfg);
  try {
    await prepareCore(core);
  } finally {
    await core.stop();
  }
}

/** Options of the `backtest` command. */
interface BacktestFlags {
  from: string;
  to?: string;
  costBps: string;
  walkForward?: boolean;
  model?: string;
  json?: boolean;
  markdown?: boolean;
}

/** The git commit of the code (for docs/track-record.md), or 'unknown' outside a git checkout. */
function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

/**
 * The one line that says a backtest window was clamped to the data (printed on stderr), or
 * null when the requested window lay within it.
 */
function clampNote(w: BacktestWindow): string | null {
  if (w.clampedToWalkForward) {
    const wf = `note: walk-forward mode scores from ${w.from} (each year's bands are chosen on the data before it; earlier days would be in sample)`;
    return w.clampedTo ? `${wf}; the data ends ${w.dataTo}; evaluated ${w.from} → ${w.to}` : `${wf}; evaluated from ${w.from}`;
  }
  if (w.clampedFrom && w.clampedTo) return `note: the data covers ${w.dataFrom} to ${w.dataTo}; evaluated ${w.from} → ${w.to}`;
  if (w.clampedFrom) return `note: the data starts ${w.dataFrom}; evaluated from ${w.from}`;
  if (w.clampedTo) return `note: the data ends ${w.dataTo}; evaluated to ${w.to}`;
  return null;
}

/**
 * What to tell the operator when PostgreSQL refused the start (DATABASE_URL), from the pg
 * error (or its cause): a database that does not exist (SQLSTATE 3D000), refused credentials
 * (28P01, 28000), an unreachable server (ECONNREFUSED, ENOTFOUND, ETIMEDOUT, EHOSTUNREACH), a
 * server that does not answer the connection in time (stalled) or closes or resets it (restarting), a
 * server starting up or shutting down (57P03, 57P01, 57P02); null for anything else. PostgreSQL's own message is quoted: it names the database or role,
 * never a password.
 */
function postgresStartProblem(err: unknown): string | null {
  for (const e of causes(err)) {
    const { code } = e;
    const said = e.message ? ` (PostgreSQL: ${e.message})` : '';
    if (code === '3D000')
      return `the database named in DATABASE_URL does not exist${said}: create it (createdb <name>) or fix DATABASE_URL`;
    if (code === '28P01' || code === '28000')
      return `PostgreSQL refused the user or password in DATABASE_URL${said}: fix them in DATABASE_URL`;
    // pg-pool: "timeout exceeded when trying to connect" (no free connection in time) or, for a
    // server that accepts the connection but never answers (stalled), "Connection terminated
    // due to connection timeout".
    if (/timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(e.message))
      return 'cannot connect to the PostgreSQL server in DATABASE_URL (no answer in time): check that it runs and that the host and port in DATABASE_URL are right';
    // The server (or a proxy in front of it) closed the connection before the start was done:
    // restarting, or shutting down.
    // A reset (ECONNRESET) is the same close when the client's start-up message was still unread.
    if (code === 'ECONNRESET' || /^Connection terminated( unexpectedly)?$/.test(e.message))
      return 'the PostgreSQL server in DATABASE_URL closed the connection during the start (restarting, or a proxy without a server behind it?): check that it runs and start again';
    if (['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code))
      return `cannot connect to the PostgreSQL server in DATABASE_URL (${code}): check that it runs and that the host and port in DATABASE_URL are right`;
    // Starting up or recovering (57P03), shutting down (57P01, 57P02): it will accept later.
    if (code === '57P03' || code === '57P01' || code === '57P02')
      return `the PostgreSQL server in DATABASE_URL is not accepting connections now${said}: start again once it is up`;
  }
  return null;
}

/**
 * A start-up failure caused by the database, as one line for the operator: each message of the
 * error and its causes with its SQLSTATE code. No stack and no query text: a failed query's
 * parameters are left out (loggableError). Before, the JSON of the error printed `{}` for an
 * Error (its message is not an enumerable field).
 */
function dependencyErrorText(err: unknown): string {
  const parts: string[] = [];
  for (const link of causes(err)) {
    const shown = loggableError(link.error);
    // A failed query is summarised by loggableError, its cause included: the walk ends there.
    const { code, message } = shown === link.error ? link : causes(shown, 1).next().value!;
    if (message) parts.push(`${message}${code ? ` [${code}]` : ''}`);
    if (shown !== link.error) break;
  }
  return parts.join(': ') || String(err);
}

/**
 * Evaluates the signal on the dataset (no database): table, JSON or the Markdown of
 * docs/track-record.md. The window is clamped to the days the data holds (the report names the
 * window evaluated, and a one-line note on stderr says it was clamped). Bad options, and a
 * window with no data to evaluate, are RangeErrors (printed, exit 2: a usage error).
 */
async function backtest(cfg: Config, opts: BacktestFlags): Promise<void> {
  const [{ MarketService }, { DatasetProvider }, { backtestByYear, backtestWindow, roundFigures, runBacktest }, fmt] = await Promise.all([
    import('./services/market.ts'),
    import('./providers/dataset/dataset.ts'),
    import('./services/backtest.ts'),
    import('./services/backtest-format.ts'),
  ]);
  const cost = Number(opts.costBps);
  if (opts.costBps.trim() === '' || !Number.isFinite(cost)) throw new RangeError(`--cost-bps must be a number, got '${opts.costBps}'`);
  const market = await MarketService.create(new DatasetProvider(cfg.DATA_DIR), null, cfg.AS_OF);
  const window = backtestWindow(market.data, opts.from, opts.to ?? market.asOf, opts.to !== undefined, opts.walkForward);
  const note = clampNote(window);
  if (note) process.stderr.write(`${note}\n`);
  const report = runBacktest(market, { from: window.from, to: window.to, costBps: cost, walkForward: opts.walkForward, model: opts.model });
  if (opts.json) process.stdout.write(JSON.stringify(roundFigures(report), null, 2) + '\n');
  else if (opts.markdown) {
    const command = ['npm run cli --', ...process.argv.slice(2)].join(' ');
    const opt = { from: window.from, to: window.to, costBps: cost, walkForward: opts.walkForward, model: opts.model };
    process.stdout.write(fmt.trackRecordMarkdown(report, { command, commit: gitCommit() }, backtestByYear(market, opt)));
  } else process.stdout.write(fmt.formatTable(report));
}

/**
 * One live ingest round of every series, then exit (`ingest --once`, for cron users): prints
 * one JSON line per series and a summary. Exit code 0 when every series succeeded, 3 when
 * some failed (they keep their last good data), 1 on a fatal error.
 */
async function ingestOnce(cfg: Config): Promise<void> {
  const { createCore, prepareCore } = await import('./core.ts');
  const core = await createCore({ ...cfg, LIVE: true });
  try {
    await prepareCore(core);
    const round = await core.ingest!.once();
    if (!round.leader) {
      process.stderr.write('Another instance holds the ingest leader lock (it ingests on its schedule); nothing fetched.\n');
      return;
    }
    for (const o of round.outcomes) process.stdout.write(`${JSON.stringify(o)}\n`);
    const failed = round.outcomes.filter((o) => o.error).length;
    process.stdout.write(
      `${JSON.stringify({ series: round.outcomes.length, failed, rows: round.outcomes.reduce((s, o) => s + o.inserted, 0), as_of: core.market.asOf, history_inserted: round.historyInserted, recompute_ms: round.recomputeMs })}\n`,
    );
    if (failed) process.exitCode = 3;
  } finally {
    await core.stop();
  }
}

/**
 * Sets the plan tier of every user registered with `email`. Needs only the database: on
 * PostgreSQL it connects beside a running service (which reads the tier per request); on
 * PGlite it opens the database, or, when a running service holds it, asks that service over
 * its admin channel (which also evicts the service's key cache).
 * @returns the number of users changed.
 */
async function setTier(cfg: Config, email: string, tier: PlanTier): Promise<{ users: number; via: string }> {
  const [{ AdminChannelError, adminSocketPath, requestSetTier }, { DatabaseInUseError, openDatabase }, { UserRepo }] = await Promise.all([
    import('./admin/channel.ts'),
    import('./store/db.ts'),
    import('./store/user-repo.ts'),
  ]);
  // No embedded database at PGLITE_DIR: nobody can be registered there, and none is created.
  if (!cfg.DATABASE_URL && !cfg.PGLITE_DIR.startsWith('memory://') && !existsSync(cfg.PGLITE_DIR)) return { users: 0, via: 'none' };
  let database;
  try {
    database = await openDatabase({ databaseUrl: cfg.DATABASE_URL, pgliteDir: cfg.PGLITE_DIR });
  } catch (err) {
    if (!(err instanceof DatabaseInUseError)) throw err;
    const socket = adminSocketPath(cfg.PGLITE_DIR);
    try {
      return { users: await requestSetTier(socket, email, tier), via: 'the running service' };
    } catch (e) {
      if (!(e instanceof AdminChannelError)) throw e;
      throw new DatabaseInUseError(`${err.message}\nThe running service could not be asked instead: ${e.message}.`);
    }
  }
  try {
    const users = await new UserRepo(database.db).setTierByEmail(email, tier);
    if (database.kind === 'postgres') await announceTierChange(cfg, database.coordination);
    return { users, via: database.kind };
  } finally {
    await database.close();
  }
}

/**
 * Tells running instances on PostgreSQL that a plan changed, so that their key caches stop
 * serving the old tier: the tier epoch in Redis (when REDIS_URL is set; checked on every
 * request) and a NOTIFY (services/keys.ts, KeyNotices). A failure is printed, not thrown: the
 * change itself is stored.
 */
async function announceTierChange(cfg: Config, coordination: Coordination): Promise<void> {
  const redis = cfg.REDIS_URL
    ? new (await import('ioredis')).Redis(cfg.REDIS_URL, {
        keyPrefix: cfg.REDIS_KEY_PREFIX,
        maxRetriesPerRequest: 1,
        connectTimeout: cfg.REDIS_CONNECT_TIMEOUT_MS,
        commandTimeout: Math.max(cfg.REDIS_COMMAND_TIMEOUT_MS, 2000),
      })
    : null;
  redis?.on('error', () => {});
  const [{ TierRateLimiter }, { KEY_CACHE_TTL_MS, KeyNotices }] = await Promise.all([
    import('./rate-limit/limiter.ts'),
    import('./services/keys.ts'),
  ]);
  const failed: { what: string; message: string }[] = [];
  try {
    await new KeyNotices(coordination, new TierRateLimiter(redis), (err, what) =>
      failed.push({ what, message: (err as Error).message }),
    ).tierChanged();
  } finally {
    redis?.disconnect();
  }
  // Two channels: the NOTIFY reaches every subscribed instance (an unsubscribed one does not
  // trust its cache); the Redis epoch is the second, for an instance whose subscription broke
  // unnoticed. A failed epoch alone is a note, not the warning of a failed NOTIFY.
  const notice = failed.find((f) => f.what.includes('PostgreSQL'));
  for (const f of failed)
    process.stderr.write(
      notice
        ? `warning: ${f.what} failed (${f.message}); running services may serve the old tier for up to ${(2 * KEY_CACHE_TTL_MS) / 60_000} min\n`
        : `note: ${f.what} failed (${f.message}); running services were told through PostgreSQL NOTIFY (the epoch is the second channel, for an instance whose subscription broke unnoticed)\n`,
    );
}

/** Why nobody was found with this email, and what identifies a user; `noDatabase` when PGLITE_DIR holds none. */
function noUserMessage(cfg: Config, email: string, noDatabase = false): string {
  const where = cfg.DATABASE_URL ? 'DATABASE_URL' : `PGLITE_DIR=${cfg.PGLITE_DIR}`;
  if (noDatabase)
    return (
      `No user with email ${email}: there is no database at ${where} (none was created). Users live in the database ` +
      `of the service they ${cfg.AUTH_ISSUER ? 'use' : 'signed up on'}: give this command the same PGLITE_DIR (or DATABASE_URL) as that service.`
    );
  const looked = ` (looked up in the database at ${where}: give this command the same PGLITE_DIR or DATABASE_URL as the service)`;
  if (cfg.AUTH_ISSUER)
    return (
      `No user with email ${email}. With an external identity provider (AUTH_ISSUER=${cfg.AUTH_ISSUER}), a user is identified ` +
      "by the JWT's `sub` and this service learns of them (and their `email` claim) at their first key or thesis: " +
      'ask them to sign in and create a key (POST /api/v1/keys/create), then run this command again' +
      looked +
      '.'
    );
  return (
    `No user with email ${email}: nobody has signed up with it on the embedded identity provider ` +
    `(POST /auth/sign-up/email or /signin)${looked}. Check the spelling, or ask the user to sign up first.`
  );
}

/** Builds the command tree; `run` receives each command's action. */
function program(): Command {
  const prog = new Command('market-intel')
    .description('Crypto market-intelligence service: REST /api/v1, MCP, and operator commands.')
    .usage('<command> [options]   (npm run cli -- <command>; npm start = serve)')
    .version(VERSION, '-v, --version', 'print the version and exit')
    .helpOption('-h, --help', 'show help')
    .helpCommand('help [command]', 'show help for a command')
    .addOption(new Option('--as-of <YYYY-MM-DD>', 'serve the state as of this UTC day (AS_OF)'))
    .addOption(new Option('--port <n>', 'port to listen on (PORT)'))
    .addOption(new Option('--host <addr>', 'interface to listen on: IP address or host name (HOST)'))
    .addOption(new Option('--data-dir <dir>', 'dataset folder (DATA_DIR)'))
    .showHelpAfterError('(run `npm run cli -- help` for usage)')
    .showSuggestionAfterError(true)
    .exitOverride();
  const flags = (cmd: Command) => cmd.optsWithGlobals<GlobalFlags>();

  prog
    .command('serve')
    .description('run the HTTP service (REST /api/v1, /docs, /mcp); what `npm start` does')
    .action((_opts, cmd: Command) => serve(config(flags(cmd))));

  prog
    .command('mcp')
    .description('serve the six MCP tools over stdio for local clients (API key from MARKET_INTEL_API_KEY; unset = unauthenticated tier)')
    .option('--stdio', 'use stdio (required: HTTP MCP is part of `serve`, at /mcp)')
    .action(async (opts: { stdio?: boolean }, cmd: Command) => {
      if (!opts.stdio)
        cmd.error('error: the HTTP MCP server runs inside `npm start` at /mcp; for stdio use: npm run cli -- mcp --stdio', {
          exitCode: USAGE_ERROR,
          code: 'mcp.stdio',
        });
      await mcpStdio(config(flags(cmd)));
    });

  prog
    .command('backfill')
    .description('compute and store the signal history, then exit')
    .action((_opts, cmd: Command) => backfill(config(flags(cmd))));

  prog
    .command('ingest')
    .description(
      'fetch new market data from the public APIs once (live mode), store it, recompute and append the signal history, then exit; for cron',
    )
    .option('--once', 'run one round and exit (required: the scheduled ingest is part of `LIVE=1 npm start`)')
    .action(async (opts: { once?: boolean }, cmd: Command) => {
      if (!opts.once)
        cmd.error(
          'error: the scheduled ingest runs inside the service (LIVE=1 npm start); for one round use: npm run cli -- ingest --once',
          {
            exitCode: USAGE_ERROR,
            code: 'ingest.once',
          },
        );
      await ingestOnce(config(flags(cmd)));
    });

  prog
    .command('backtest')
    .description('evaluate the signal on the dataset (per asset and pooled): returns, Sharpe, drawdowns, edges, ICs; no database needed')
    .option('--from <YYYY-MM-DD>', 'first decision day', '2020-01-01')
    .option('--to <YYYY-MM-DD>', 'last decision day (default: the data as-of day)')
    .option('--cost-bps <n>', 'cost per unit of position change, basis points', '10')
    .option('--walk-forward', 'choose the parameters per year on the data before it and score the year out of sample')
    .option('--model <version>', 'signals-v1 to signals-v4 (default the served model; walk-forward: v2, v3 or v4)')
    .addOption(new Option('--json', 'print the report as JSON').conflicts('markdown'))
    .option('--markdown', 'print docs/track-record.md')
    .action(async (opts: BacktestFlags, cmd: Command) => {
      try {
        await backtest(config(flags(cmd)), opts);
      } catch (err) {
        // A bad option or a window without data: the one-line message, exit 2 as for other usage errors.
        if (!(err instanceof RangeError)) throw err;
        process.stderr.write(`${err.message}\n`);
        process.exitCode = USAGE_ERROR;
      }
    });

  const users = prog.command('users').description('manage users').helpCommand('help [command]', 'show help for a command');
  users
    .command('set-tier')
    .description(
      "set a user's plan; every key of the user reports it from its next request. Works for any registered email, " +
        'also while the service runs (PostgreSQL: directly; embedded PGlite: through the running service)',
    )
    .addArgument(
      new Argument('<email>', "the user's email").argParser((v: string) => {
        // The shape of an address (something@domain), not its existence: that is looked up.
        if (!/^[^\s@]+@[^\s@]+$/.test(v))
          throw new InvalidArgumentError('It is not an email address: give the email the user signed up with.');
        return v;
      }),
    )
    .addArgument(new Argument('<tier>', 'the plan').choices(PLAN_TIERS))
    .action(async (email: string, tier: PlanTier, _opts, cmd: Command) => {
      const cfg = config(flags(cmd));
      const r = await setTier(cfg, email, tier);
      if (r.users === 0) {
        process.stderr.write(`${noUserMessage(cfg, email, r.via === 'none')}\n`);
        process.exitCode = 1;
      } else {
        const accounts = r.users > 1 ? ` for ${r.users} accounts` : '';
        process.stdout.write(
          `${email}: tier set to ${tier}${accounts}${r.via === 'the running service' ? ' (by the running service)' : ''}\n`,
        );
        // With an external provider several users (several `sub`s) may carry the same `email` claim.
        if (r.users > 1 && tier !== 'free')
          process.stderr.write(
            `note: ${r.users} accounts have the email ${email} (users are told apart by their identity provider's \`sub\`), and all of them now have the ${tier} plan: check that each is your customer's\n`,
          );
        // Anyone can sign up under any address with the embedded provider (it sends no email).
        if (!cfg.AUTH_ISSUER && tier !== 'free')
          process.stderr.write(
            `note: the embedded identity provider does not verify email addresses, so whoever signed up first as ${email} now has the ${tier} plan: check that the account is your customer's\n`,
          );
      }
    });
  return prog;
}

async function main(): Promise<void> {
  try {
    const args = process.argv.slice(2);
    // No command (nothing, or only the global flags) runs `serve`, as before.
    // Global flags may come before a command (`--as-of 2024-03-01 backfill`): `serve` is added
    // only when no command is named at all.
    const commands = new Set(['serve', 'mcp', 'backfill', 'backtest', 'ingest', 'users', 'help']);
    // `help <unknown>`: Commander would print the whole help with no word about the name; drop
    // `help` so that the name gets the unknown-command error (with its suggestion), exit 2.
    if (args[0] === 'help' && args[1] !== undefined && !args[1].startsWith('-') && !commands.has(args[1])) args.shift();
    const named = args.some((a) => commands.has(a));
    if (args.length === 0 || (/^--(as-of|port|host|data-dir)(=|$)/.test(args[0]!) && !named)) args.unshift('serve');
    await program().parseAsync(args, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander has printed the help, the version or the error already.
      process.exit(err.exitCode === 0 ? 0 : USAGE_ERROR);
    }
    throw err;
  }
}

/** Errors whose message says what to do (printed alone); by name, so that their modules need not be loaded here. */
const EXPLAINED = new Set(['DatabaseInUseError', 'DataValidationError']);

main().catch(async (err: unknown) => {
  await flushServeLog();
  if (
    err instanceof ConfigError ||
    err instanceof ServiceError ||
    err instanceof RangeError ||
    (err instanceof Error && EXPLAINED.has(err.name))
  ) {
    process.stderr.write(`${(err as Error).message}\n`);
  } else if (listenRefusal(err)) {
    process.stderr.write(`Failed to start: ${listenRefusal(err)}\n`);
  } else if (postgresStartProblem(err)) {
    process.stderr.write(`Failed to start: ${postgresStartProblem(err)}\n`);
  } else if (isDependencyDown(err)) {
    // No stack: a database error's message may carry SQL and parameters.
    process.stderr.write(`Failed to start: ${unexpectedError(err).message} (${dependencyErrorText(err)})\n`);
  } else {
    const e = loggableError(err);
    process.stderr.write(`Failed to start: ${e === err ? ((err as Error)?.stack ?? String(err)) : JSON.stringify(e)}\n`);
  }
  process.exit(1);
});
