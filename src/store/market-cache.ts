import { readFileSync } from 'node:fs';
import { rename, unlink, writeFile } from 'node:fs/promises';
import { deserialize, serialize } from 'node:v8';

/**
 * Bump when the shape of the cached data (`StoredMarket`, the result of `MarketRepo.loadAll`)
 * changes: a copy written by other code is then a miss, never misread.
 */
export const MARKET_CACHE_FORMAT = 1;

/** Which content of which store a copy holds (`MarketRepo.revision`: the `market_revision` row, migration 0005). */
export interface StoreRevision {
  /** Random per database (uuid). */
  storeId: string;
  /** Incremented by every statement writing the market tables (embedded database). */
  revision: number;
  /** Drawn at random by every such statement: a restored or copied folder that reaches the same revision number by other writes has another token. */
  token: string;
  /** The newest migration applied (its `created_at` in drizzle's journal): a schema change is a miss too. */
  migration: string;
}

/** The file: the key, then the data serialized on its own, so a miss does not decode the data. */
interface CacheFile extends StoreRevision {
  format: number;
  body: Uint8Array;
}

/**
 * A copy of the market store's content (`T`: `StoredMarket`, what `MarketRepo.loadAll`
 * returns) in one local file, in V8's serialization format (node:v8), keyed by the store's
 * revision ({@link StoreRevision}): valid exactly while no statement has written the market
 * tables since it was taken, so a start reads the file (~130 ms for the bundled history)
 * instead of the tables (~450-700 ms on PGlite). Anything else (no file, another store,
 * revision, token, migration or format, an unreadable file) is a miss and the caller reads
 * the store. Used by the embedded database's start-up only (src/core.ts), next to its folder:
 * `<PGLITE_DIR>.market-cache`; only the process holding the folder's lock writes it.
 */
export class MarketCache<T extends object> {
  #writing: Promise<void> = Promise.resolve();

  /** @param file path of the cache file (its folder must exist). */
  constructor(readonly file: string) {}

  /**
   * The copy taken at `current`, or null on a miss. Synchronous (one file read, at start-up,
   * where nothing else waits); the data is decoded only when the key matches. Never throws.
   */
  read(current: StoreRevision): T | null {
    try {
      const c = deserialize(readFileSync(this.file)) as Partial<CacheFile> | null;
      if (
        c === null ||
        typeof c !== 'object' ||
        c.format !== MARKET_CACHE_FORMAT ||
        c.storeId !== current.storeId ||
        c.revision !== current.revision ||
        c.token !== current.token ||
        c.migration !== current.migration ||
        !(c.body instanceof Uint8Array)
      )
        return null;
      const data = deserialize(c.body) as T | null;
      return data !== null && typeof data === 'object' ? data : null;
    } catch {
      return null;
    }
  }

  /**
   * Writes the copy of the store's content `data`, read after the store's revision was `at`:
   * it may hold writes after `at` (then the revision differs and it is a miss), never miss a
   * write before it. Serialized before this returns; written to `<file>.tmp` and renamed, so
   * a reader never sees half a file; writes of one process run one after the other.
   * @returns a promise that rejects on a write error (the caller logs it: the cache is an optimisation).
   */
  write(at: StoreRevision, data: T): Promise<void> {
    const key: StoreRevision = { storeId: at.storeId, revision: at.revision, token: at.token, migration: at.migration };
    const bytes = serialize({ format: MARKET_CACHE_FORMAT, ...key, body: serialize(data) } satisfies CacheFile);
    const tmp = `${this.file}.tmp`;
    const run = async () => {
      try {
        await writeFile(tmp, bytes);
        await rename(tmp, this.file);
      } catch (e) {
        await unlink(tmp).catch(() => {});
        throw e;
      }
    };
    const done = this.#writing.then(run);
    this.#writing = done.catch(() => {});
    return done;
  }
}
