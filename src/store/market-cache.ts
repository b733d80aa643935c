import { readFileSync } from 'node:fs';
import { rename, unlink, writeFile } from 'node:fs/promises';
import { deserialize, serialize } from 'node:v8';

/**
 * Bump when the shape of the cached data (`StoredMarket`, the result of `MarketRepo.loadAll`)
 * changes: a copy written by other code is then a miss, never misread.
 */
export const MARKET_CACHE_FORMAT = 1;

/** Which content of which store a copy holds (the `market_revision` row, migration 0005). */
export interface StoreRevision {
  /** Random per database (uuid). */
  storeId: string;
  /** Incremented by every statement writing the market tables. */
  revision: number;
}

interface CacheFile<T> extends StoreRevision {
  format: number;
  data: T;
}

/**
 * A copy of the market store's content (`T`: `StoredMarket`, what `MarketRepo.loadAll`
 * returns) in one local file, in V8's serialization format (node:v8), keyed by the store's id
 * and revision: valid exactly while no statement has written the market tables since it was
 * taken, so a restart reads the file (~130 ms for the bundled history) instead of the tables
 * (~450-700 ms on PGlite). Anything else (no file, another store, another revision or format,
 * an unreadable file) is a miss and the caller reads the store. Used with the embedded
 * database only (src/core.ts), next to its folder: `<PGLITE_DIR>.market-cache`.
 */
export class MarketCache<T extends object> {
  /** @param file path of the cache file (its folder must exist). */
  constructor(readonly file: string) {}

  /**
   * The copy taken at `current`, or null on a miss. Synchronous (one file read; the start-up
   * has nothing else to do meanwhile). Never throws.
   */
  read(current: StoreRevision): T | null {
    let c: CacheFile<T>;
    try {
      c = deserialize(readFileSync(this.file)) as CacheFile<T>;
    } catch {
      return null;
    }
    if (
      c === null ||
      typeof c !== 'object' ||
      c.format !== MARKET_CACHE_FORMAT ||
      c.storeId !== current.storeId ||
      c.revision !== current.revision ||
      c.data === null ||
      typeof c.data !== 'object'
    )
      return null;
    return c.data;
  }

  /**
   * Writes the copy of the store's content `data`, read after the store's revision was `at`
   * (so it holds revision `at` or later: a later write makes the revision differ and the copy
   * a miss). Written to a temporary file and renamed, so a reader never sees half a file.
   * @throws on a write error (the caller logs it; the cache is an optimisation).
   */
  async write(at: StoreRevision, data: T): Promise<void> {
    const body: CacheFile<T> = { format: MARKET_CACHE_FORMAT, storeId: at.storeId, revision: at.revision, data };
    const tmp = `${this.file}.${process.pid}.tmp`;
    try {
      await writeFile(tmp, serialize(body));
      await rename(tmp, this.file);
    } catch (e) {
      await unlink(tmp).catch(() => {});
      throw e;
    }
  }
}
