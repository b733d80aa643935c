import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT_DIR } from '../../src/config.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { MarketService } from '../../src/services/market.ts';
import { openDatabase } from '../../src/store/db.ts';
import { HistoryRepo } from '../../src/store/history-repo.ts';
import { ENGINE_VERSION, runBackfill } from '../../src/jobs/backfill.ts';
import { createService } from '../../src/server.ts';
import { testConfig } from '../helpers/env.ts';

const tmp: string[] = [];
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** Copies data/ and deletes every row dated after `day` from every time series. */
function truncatedDataset(day: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'mi-data-'));
  tmp.push(dir);
  cpSync(path.join(ROOT_DIR, 'data'), dir, { recursive: true });
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = path.join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else if (n.endsWith('.csv')) {
        const [head, ...rows] = readFileSync(p, 'utf8').trimEnd().split('\n');
        // First column is a date (YYYY-MM-DD), a month (YYYY-MM) or an ISO time.
        writeFileSync(p, [head, ...rows.filter((r) => r.slice(0, 10) <= day)].join('\n') + '\n');
      }
    }
  };
  walk(dir);
  return dir;
}

async function storedHistory(dataDir: string, upTo: string) {
  const db = await openDatabase({ pgliteDir: 'memory://' });
  try {
    const market = await MarketService.create(new DatasetProvider(dataDir), new HistoryRepo(db.db));
    await runBackfill(market, new HistoryRepo(db.db));
    const repo = new HistoryRepo(db.db);
    const out: Record<string, unknown[]> = {};
    for (const a of market.data.assets) out[a.asset] = await repo.listChanges(a.asset, '1900-01-01', upTo, 100000, ENGINE_VERSION);
    return out;
  } finally {
    await db.close();
  }
}

describe('signal history backfill', () => {
  test('is point-in-time: removing all data after day D changes nothing stored up to D', async () => {
    const D = '2024-06-30';
    const full = await storedHistory(path.join(ROOT_DIR, 'data'), D);
    const cut = await storedHistory(truncatedDataset(D), D);
    let n = 0;
    for (const asset of Object.keys(full)) {
      assert.deepEqual(cut[asset], full[asset], asset);
      n += full[asset]!.length;
    }
    assert.ok(n > 50, `expected a real history, got ${n} changes`);
  });

  test('runs once: a restart on the same database skips it, and re-running inserts nothing', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mi-pglite-'));
    tmp.push(dir);
    const first = await createService(testConfig({ PGLITE_DIR: dir }));
    const count = (await first.market.signalHistory('bitcoin', 365, 200)).value.entries.length;
    await first.stop();
    const second = await createService(testConfig({ PGLITE_DIR: dir }));
    try {
      const again = await runBackfill(second.market, second.repos.history);
      assert.ok(again.every((r) => r.skipped && r.inserted === 0));
      assert.equal((await second.market.signalHistory('bitcoin', 365, 200)).value.entries.length, count);
    } finally {
      await second.stop();
    }
  });

  test('a full backfill of all assets stores only changes, each with its factors', async () => {
    const db = await openDatabase({ pgliteDir: 'memory://' });
    try {
      const market = await MarketService.create(new DatasetProvider(path.join(ROOT_DIR, 'data')), new HistoryRepo(db.db));
      const res = await runBackfill(market, new HistoryRepo(db.db));
      assert.equal(res.length, 11);
      const repo = new HistoryRepo(db.db);
      for (const a of ['bitcoin', 'hyperliquid']) {
        const rows = (await repo.listChanges(a, '1900-01-01', '2100-01-01', 100000, ENGINE_VERSION)).reverse();
        assert.equal(rows[0]!.previous_signal, null);
        for (let i = 1; i < rows.length; i++) {
          assert.equal(rows[i]!.previous_signal, rows[i - 1]!.signal, `${a} ${rows[i]!.changed_at}`);
          assert.notEqual(rows[i]!.signal, rows[i]!.previous_signal);
          assert.ok(rows[i]!.factors.length > 0);
          assert.equal(rows[i]!.model_version, ENGINE_VERSION);
        }
      }
    } finally {
      await db.close();
    }
  });
});
