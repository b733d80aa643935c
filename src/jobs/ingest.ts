import { Cron } from 'croner';
import type { SourcedPoints } from '../engine/types.ts';
import type { LiveSource, SeriesPoints } from '../providers/live/source.ts';
import type { MarketDataProvider } from '../providers/port.ts';
import { toFreshness } from '../services/market-data.ts';
import type { MarketService } from '../services/market.ts';
import type { Coordination } from '../store/db.ts';
import type { HistoryRepo } from '../store/history-repo.ts';
import type { MarketRepo, SeriesSpec } from '../store/market-repo.ts';
import { runBackfill } from './backfill.ts';

/** The NOTIFY channel on which the ingest leader tells the other instances to reload. */
export const MARKET_CHANNEL = 'market_data';

/** The part of a pino logger the ingest uses. */
export interface IngestLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** What the ingest job works on (src/core.ts builds it in live mode). */
export interface IngestDeps {
  /** The upstream series (providers/live). */
  sources: readonly LiveSource[];
  /** The market-data store, on the jobs connection. */
  repo: MarketRepo;
  /** Signal history, on the jobs connection. */
  history: HistoryRepo;
  /** The served market state, recomputed after new data. */
  market: MarketService;
  /** Reads the store as the engine's MarketData. */
  provider: MarketDataProvider;
  coordination: Coordination;
  log: IngestLog;
  /** Today's UTC day (YYYY-MM-DD); only days before it are complete. Default: the clock. */
  today?: () => string;
  /** Where a series with nothing stored starts: the day after this one (the bundled data's end). */
  startAfter: string;
  /** Bound on one series' fetch, ms (all retries included). */
  fetchTimeoutMs: number;
  /** Aborts the fetches of a round in progress (the service is stopping). */
  stopSignal?: AbortSignal;
}

/** Per-process ingest state beside the deps: whether stored rows still await a recompute, and this instance's id in notices. */
const pending = new WeakMap<IngestDeps, boolean>();
/** Each instance's id in NOTIFY payloads (`data:<id>`), so an instance ignores its own notices (keyed by its database coordination). */
const ids = new WeakMap<Coordination, string>();
function instanceId(c: Coordination): string {
  let id = ids.get(c);
  if (!id) ids.set(c, (id = `${process.pid}-${Math.random().toString(36).slice(2, 10)}`));
  return id;
}

/** One series' result in a round: rows stored, or the error (the series keeps what it had). */
export interface SeriesOutcome {
  series: string;
  inserted: number;
  /** First day fetched after (exclusive). */
  after: string;
  error?: string;
  ms: number;
}

/** What one ingest round did. */
export interface IngestRound {
  /** False when another instance holds the leader lock: nothing was fetched. */
  leader: boolean;
  outcomes: SeriesOutcome[];
  /** Whether new rows were stored, so the state was recomputed and history appended. */
  recomputed: boolean;
  /** Signal-history rows appended. */
  historyInserted: number;
  /** Duration of the recompute (reload, series, history), ms; 0 when none. */
  recomputeMs: number;
}

const today = () => new Date().toISOString().slice(0, 10);

/** The fetched points strictly after `after` and before `today`, each with the fetch's source, as stored. */
function sourced(p: SeriesPoints, after: string, today: string): SourcedPoints {
  const points = p.points.filter((x) => x.date > after && x.date < today).map((x) => ({ ...x, source: p.source }));
  return { kind: p.kind, points } as SourcedPoints;
}

function specOf(s: LiveSource, source: string): SeriesSpec {
  return {
    series: s.series,
    kind: s.kind,
    subject: s.kind === 'metric' ? s.chain : s.asset,
    metric: s.metric,
    source,
    origin: 'live',
    cadenceHours: s.cadenceHours,
  };
}

/**
 * An error message fit for storage and the public /status: one line, bounded, no stack, no
 * SQL (a failed query is reported by its cause, e.g. a statement timeout), no URL query
 * strings (a mirror's URL may carry a key).
 */
export function errorText(e: unknown): string {
  if (e instanceof Error && /^Failed query/.test(e.message)) {
    const cause = (e as { cause?: unknown }).cause;
    return `database error while storing: ${cause instanceof Error ? cause.message : 'unknown cause'}; retried next round`
      .replace(/\s+/g, ' ')
      .slice(0, 500);
  }
  const m = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return m
    .replace(/\?[^\s:,;)]*/g, '')
    .replace(/\s+/g, ' ')
    .slice(0, 500);
}

/** The newest candle day stored over all assets, or null. */
async function newestStoredCandle(repo: MarketRepo): Promise<string | null> {
  let newest: string | null = null;
  for (const s of await repo.seriesStates())
    if (s.kind === 'candles' && s.newestDate && (!newest || s.newestDate > newest)) newest = s.newestDate;
  return newest;
}

/**
 * Reloads the served state from the store: every series recomputed, the new signal changes
 * appended (leader only), the answer cache refilled, then swapped in at once.
 */
async function recompute(deps: IngestDeps, appendHistory: boolean): Promise<number> {
  deps.market.reload(await deps.provider.load());
  const inserted = appendHistory ? (await runBackfill(deps.market, deps.history)).reduce((s, r) => s + r.inserted, 0) : 0;
  deps.market.warm();
  return inserted;
}

/**
 * One ingest round (docs/live-data.md, "Ingest"): when this instance is the leader, fetches
 * each series from the day after the newest one stored up to yesterday (all series at once;
 * the adapters keep each host within its budget), writes each series in its own transaction,
 * then, if anything new was stored, reloads the market state from the store, appends the new
 * signal-history changes (point-in-time) and tells the other instances to reload. A failed
 * series is recorded (last_error) and keeps serving what it had; it is tried again next round.
 * @throws only when the database fails while reloading (the served state is then unchanged).
 */
export async function ingestRound(deps: IngestDeps, sources: readonly LiveSource[] = deps.sources): Promise<IngestRound> {
  const none: IngestRound = { leader: false, outcomes: [], recomputed: false, historyInserted: 0, recomputeMs: 0 };
  let leader: boolean;
  try {
    leader = await deps.coordination.tryLeadership();
  } catch (err) {
    deps.log.warn({ err: errorText(err) }, 'ingest: could not reach the database for the leader lock; skipping this round');
    return none;
  }
  if (!leader) {
    // Not the leader: catch up if the leader stored newer data than served (a missed notice).
    try {
      const newest = await newestStoredCandle(deps.repo);
      if (newest && newest > deps.market.asOf) {
        await recompute(deps, false);
        deps.log.info({ as_of: deps.market.asOf }, 'ingest: caught up with the data the leader stored');
      }
    } catch (err) {
      deps.log.warn({ err: errorText(err) }, 'ingest: could not check the store for newer data; trying again next round');
    }
    return none;
  }
  const day = (deps.today ?? today)();
  const states = new Map((await deps.repo.seriesStates()).map((s) => [s.series, s]));
  const outcomes = await Promise.all(
    sources.map(async (src): Promise<SeriesOutcome> => {
      const t0 = performance.now();
      // Asked even when nothing new can be complete yet: some sources (Solana) accumulate samples between rounds.
      const after = states.get(src.series)?.newestDate ?? deps.startAfter;
      try {
        // Aborted with what ran out, so the error (logs, last_error) says it rather than 'aborted'.
        const bound = new AbortController();
        const timer = setTimeout(
          () => bound.abort(new Error(`no result within the series' time bound of ${deps.fetchTimeoutMs} ms`)),
          deps.fetchTimeoutMs,
        );
        const got = await src
          .fetch(after, day, deps.stopSignal ? AbortSignal.any([bound.signal, deps.stopSignal]) : bound.signal)
          .finally(() => clearTimeout(timer));
        const inserted = await deps.repo.writeFetched(specOf(src, got.source), sourced(got, after, day));
        return { series: src.series, inserted, after, ms: Math.round(performance.now() - t0) };
      } catch (err) {
        const error = errorText(err);
        // A fetch cut short by the service stopping is no failure of the upstream: last_error
        // (GET /status, every instance) keeps what the series last really had.
        if (!deps.stopSignal?.aborted)
          await deps.repo.recordError(specOf(src, states.get(src.series)?.source ?? src.source), error).catch(() => {});
        return { series: src.series, inserted: 0, after, error, ms: Math.round(performance.now() - t0) };
      }
    }),
  );
  const failed = outcomes.filter((o) => o.error);
  if (failed.length)
    deps.log.warn(
      { failed: failed.map((o) => ({ series: o.series, error: o.error })) },
      'ingest: some series failed; they keep their last good data and are retried next round',
    );
  const stored = outcomes.reduce((s, o) => s + o.inserted, 0);
  // Rows stored by an earlier round whose recompute failed are recomputed now.
  if (stored > 0) pending.set(deps, true);
  if (!pending.get(deps)) {
    deps.market.updateSeriesStatus((await deps.repo.seriesStates()).map(toFreshness));
    await deps.coordination.notify(MARKET_CHANNEL, `status:${instanceId(deps.coordination)}`).catch(() => {});
    deps.log.info({ series: outcomes.length, failed: failed.length }, 'ingest: round done, nothing new');
    return { leader: true, outcomes, recomputed: false, historyInserted: 0, recomputeMs: 0 };
  }
  const t1 = performance.now();
  const historyInserted = await recompute(deps, true);
  pending.set(deps, false);
  const recomputeMs = Math.round(performance.now() - t1);
  await deps.coordination.notify(MARKET_CHANNEL, `data:${instanceId(deps.coordination)}`).catch(() => {});
  deps.log.info(
    { rows: stored, as_of: deps.market.asOf, history_inserted: historyInserted, recompute_ms: recomputeMs, failed: failed.length },
    'ingest: new data stored, state recomputed',
  );
  return { leader: true, outcomes, recomputed: true, historyInserted, recomputeMs };
}

/**
 * Follows the leader (docs/live-data.md, "Several instances"): on each notice, reloads the
 * market state from the store (`data`) or only the series' freshness (`status`). Notices carry
 * the sender's id; an instance ignores its own. A notice missed while the connection was down
 * is made up for at the next round, which compares the store with what is served.
 */
export async function followIngest(deps: Pick<IngestDeps, 'coordination' | 'market' | 'provider' | 'repo' | 'log'>): Promise<void> {
  let chain = Promise.resolve();
  await deps.coordination.listen(MARKET_CHANNEL, (notice) => {
    const [payload, from] = notice.split(':');
    if (from === instanceId(deps.coordination)) return;
    chain = chain.then(async () => {
      try {
        if (payload === 'data') {
          deps.market.reload(await deps.provider.load());
          deps.market.warm();
          deps.log.info({ as_of: deps.market.asOf }, 'ingest: reloaded the market state the leader stored');
        } else {
          deps.market.updateSeriesStatus((await deps.repo.seriesStates()).map(toFreshness));
        }
      } catch (err) {
        deps.log.warn({ err: errorText(err) }, 'ingest: reload after a notice failed; keeping the current state until the next notice');
      }
    });
  });
}

/** A running ingest schedule. */
export interface IngestSchedule {
  /** Resolves when the rounds in progress have finished. */
  stop(): Promise<void>;
  /** Runs one round of every series now (queued after a round in progress). */
  runNow(): Promise<IngestRound>;
}

/**
 * Schedules the ingest (croner, UTC): one job per distinct cron pattern of the sources, each
 * running a round over its series; rounds never overlap (one queue), and one round of every
 * series runs at once at start. Non-leaders retry the lock at each tick, so one takes over
 * when the leader stops.
 */
export function scheduleIngest(deps: IngestDeps): IngestSchedule {
  let queue: Promise<unknown> = Promise.resolve();
  const stopping = new AbortController();
  const roundDeps: IngestDeps = { ...deps, stopSignal: stopping.signal };
  const enqueue = (sources: readonly LiveSource[]) => {
    const run = queue.then(() => ingestRound(roundDeps, sources));
    queue = run.catch((err: unknown) => deps.log.warn({ err: errorText(err) }, 'ingest: round failed; retried at the next tick'));
    return run;
  };
  const bySchedule = new Map<string, LiveSource[]>();
  for (const s of deps.sources) bySchedule.set(s.schedule, [...(bySchedule.get(s.schedule) ?? []), s]);
  const jobs = [...bySchedule].map(
    ([pattern, group]) =>
      new Cron(pattern, { timezone: 'UTC', protect: true, unref: true }, () =>
        enqueue(group).then(
          () => {},
          () => {},
        ),
      ),
  );
  void followIngest(deps).catch((err: unknown) => deps.log.warn({ err: errorText(err) }, 'ingest: cannot listen for reload notices'));
  void enqueue(deps.sources).catch(() => {});
  deps.log.info({ series: deps.sources.length, schedules: [...bySchedule.keys()] }, 'ingest: live mode, scheduled');
  return {
    async stop() {
      for (const j of jobs) j.stop();
      stopping.abort(new Error('the service is stopping'));
      await queue.catch(() => {});
    },
    runNow: () => enqueue(deps.sources),
  };
}
