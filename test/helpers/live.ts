import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { createCore, prepareCore, type Core } from '../../src/core.ts';
import { addDays } from '../../src/engine/util.ts';
import type { IngestDeps } from '../../src/jobs/ingest.ts';
import { createLiveSources } from '../../src/providers/live/index.ts';
import { StoredMarketProvider } from '../../src/services/market-data.ts';
import { HistoryRepo } from '../../src/store/history-repo.ts';
import { MarketRepo } from '../../src/store/market-repo.ts';
import { testConfig } from './env.ts';
import { startUpstream, type Upstream } from './upstream.ts';

/** Epoch ms of 00:00 UTC of a day (YYYY-MM-DD). */
export const at = (day: string): number => Date.parse(`${day}T00:00:00Z`);

/** A copy of the dataset files the service reads (data/), every row after `cut` dropped. */
export function cutDataset(cut: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'live-data-'));
  const src = path.join(ROOT_DIR, 'data');
  for (const sub of ['prices', 'funding', 'chains']) {
    mkdirSync(path.join(dir, sub));
    for (const f of readdirSync(path.join(src, sub)).filter((n) => n.endsWith('.csv'))) {
      const [header, ...rows] = readFileSync(path.join(src, sub, f), 'utf8')
        .split(/\r?\n/)
        .filter(Boolean);
      const dateCol = header!.split(',').indexOf('date');
      if (dateCol < 0) {
        copyFileSync(path.join(src, sub, f), path.join(dir, sub, f));
        continue;
      }
      writeFileSync(path.join(dir, sub, f), [header, ...rows.filter((r) => r.split(',')[dateCol]! <= cut)].join('\n') + '\n');
    }
  }
  const [header, ...rows] = readFileSync(path.join(src, 'fear_greed.csv'), 'utf8').split(/\r?\n/).filter(Boolean);
  writeFileSync(path.join(dir, 'fear_greed.csv'), [header, ...rows.filter((r) => r.slice(0, 10) <= cut)].join('\n') + '\n');
  return dir;
}

/** Environment of a live-mode service whose upstreams are the fake `upstream` (short timeouts, generous budgets). */
export function liveEnv(upstream: Upstream, dataDir: string, over: Record<string, string> = {}): Record<string, string> {
  const u = upstream.baseUrls;
  return {
    DATA_DIR: dataDir,
    LIVE: '1',
    INGEST_TIMEOUT_MS: '2000',
    INGEST_RETRIES: '1',
    INGEST_HOST_BUDGET_PER_MINUTE: '6000',
    UPSTREAM_BINANCE_URL: u.binance,
    UPSTREAM_BINANCE_FUTURES_URL: u.binanceFutures,
    UPSTREAM_OKX_URL: u.okx,
    UPSTREAM_HYPERLIQUID_URL: u.hyperliquid,
    UPSTREAM_ALTERNATIVE_ME_URL: u.alternativeMe,
    UPSTREAM_DEFILLAMA_URL: u.defillama,
    UPSTREAM_GROWTHEPIE_URL: u.growthepie,
    UPSTREAM_HYPERLIQUID_STATS_URL: u.hyperliquidStats,
    UPSTREAM_SOLANA_RPC_URL: u.solanaRpc,
    ...over,
  };
}

/**
 * The ingest dependencies of one core: live sources pointed at the fake `upstreamUrls` (2 s
 * per attempt, `retries` retries, a generous host budget), the core's stores, series starting
 * after `cut`, the upstreams' day given by `today`, 30 s per series.
 */
export function ingestDepsOf(core: Core, upstreamUrls: Upstream['baseUrls'], cut: string, today: () => string, retries = 1): IngestDeps {
  return {
    sources: createLiveSources({ baseUrls: upstreamUrls, timeoutMs: 2000, retries, hostBudgetPerMinute: 6000 }),
    repo: new MarketRepo(core.database.jobs),
    history: new HistoryRepo(core.database.jobs),
    market: core.market,
    provider: new StoredMarketProvider(new MarketRepo(core.database.jobs)),
    coordination: core.database.coordination,
    log: core.log,
    startAfter: cut,
    today,
    fetchTimeoutMs: 30_000,
  };
}

/** What {@link withLiveCore} hands its test. */
export interface LiveCoreContext {
  core: Core;
  upstream: Upstream;
  /** The last day of the dataset cut; the live series continue from it. */
  cut: string;
  /** The upstream fake's today: `cut` + 3 days. */
  today: string;
  /**
   * Ingest dependencies for this core: the live sources pointed at the fake (2 s per attempt,
   * `retries` retries, a generous host budget), its stores, and `over` on top.
   */
  deps(retries: number, over: Partial<IngestDeps>): IngestDeps;
}

/**
 * Runs `fn` against a prepared live-mode core on the bundled dataset cut after 2025-04-10,
 * with every upstream a local fake whose today is 3 days later; stops the core, the fake and
 * deletes the cut dataset afterwards, whatever `fn` does.
 */
export async function withLiveCore(fn: (ctx: LiveCoreContext) => Promise<void>): Promise<void> {
  const cut = '2025-04-10';
  const today = addDays(cut, 3);
  const upstream = await startUpstream();
  upstream.setToday(today);
  const dir = cutDataset(cut);
  let core: Core | undefined;
  try {
    const c = (core = await createCore(testConfig(liveEnv(upstream, dir))));
    await prepareCore(c);
    const deps = (retries: number, over: Partial<IngestDeps>): IngestDeps => ({
      ...ingestDepsOf(c, upstream.baseUrls, cut, () => today, retries),
      ...over,
    });
    await fn({ core: c, upstream, cut, today, deps });
  } finally {
    await core?.stop();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
