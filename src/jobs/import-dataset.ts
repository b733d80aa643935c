import type { SeriesExport } from '../providers/port.ts';
import type { MarketRepo } from '../store/market-repo.ts';

/** Name of the bundled dataset's import in `market_imports`. */
export const BUNDLED_IMPORT = 'bundled-dataset';

/** The bundled dataset as the import sees it (DatasetProvider). */
export interface BundledDataset {
  fingerprint(): Promise<string>;
  exportSeries(): Promise<SeriesExport[]>;
}

/** What an import did: rows inserted and whether it was skipped (same fingerprint already imported). */
export interface ImportResult {
  skipped: boolean;
  inserted: number;
  series: number;
}

/**
 * Imports the bundled dataset (data/, provenance per row) into the market-data store, in one
 * transaction, unless the same files (by fingerprint) were imported before. Idempotent:
 * stored rows are never rewritten, so a changed dataset only adds the days the store lacks
 * and live data already stored wins (docs/live-data.md, "Store").
 * @throws when the database fails (nothing is written then).
 */
export async function importBundledDataset(dataset: BundledDataset, repo: MarketRepo): Promise<ImportResult> {
  const fingerprint = await dataset.fingerprint();
  if ((await repo.importFingerprint(BUNDLED_IMPORT)) === fingerprint) return { skipped: true, inserted: 0, series: 0 };
  const series = await dataset.exportSeries();
  const inserted = await repo.importAll(
    BUNDLED_IMPORT,
    fingerprint,
    series.map((s) => ({
      spec: {
        series: s.series,
        kind: s.kind,
        subject: s.subject,
        metric: s.metric,
        source: s.source,
        origin: 'bundled' as const,
        cadenceHours: s.cadence_hours,
      },
      rows: s.rows,
    })),
  );
  return { skipped: false, inserted, series: series.length };
}
