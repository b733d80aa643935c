import { Worker } from 'node:worker_threads';
import { unavailable } from '../errors.ts';
import type { MarketData } from '../providers/port.ts';
import type { TrackRecordData } from './schemas/track-record.ts';

/** Bound on one computation of the track record in its worker thread, ms. */
export const TRACK_RECORD_TIMEOUT_MS = 60_000;
/**
 * The track-record worker's young generation, MB (V8 resourceLimits.maxYoungGenerationSizeMb).
 * Its old generation is not set here: the process's `--max-old-space-size` (384 MB under `npm
 * start`) overrides a worker's own limit; an overrun ends the worker with an error, a 503.
 */
const TRACK_RECORD_WORKER_YOUNG_MB = 4;

/**
 * Computes `trackRecord` (services/backtest.ts) for `data` in a worker thread: the compiled
 * services/track-record-worker.js next to this file (what `npm start` runs), or, running from
 * the TypeScript sources (tsx: the tests, `npm run dev`), the .ts source with tsx's loader
 * registered in the worker first (Node 20 does not apply a parent's `--import tsx` to a
 * worker's entry file). The worker is terminated after `timeoutMs`.
 * @throws ServiceError SERVICE_UNAVAILABLE when the worker fails, exits without an answer or
 *   times out.
 */
export function trackRecordOffThread(data: MarketData, timeoutMs = TRACK_RECORD_TIMEOUT_MS): Promise<TrackRecordData> {
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./track-record-worker.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  return new Promise((resolve, reject) => {
    const failed = (why: string) => unavailable(`The track record could not be computed (${why}); try again in a minute`, 60);
    // The worker would otherwise inherit `npm start`'s 16 MB semi-spaces: with a 4 MB young
    // generation the service's peak RSS over a first /track-record was 441-448 MB instead of
    // 486 MB on Node 20 (598-604 instead of 721 MB on Node 24; docs/benchmarks.md, "Ninth
    // session").
    const resourceLimits = { maxYoungGenerationSizeMb: TRACK_RECORD_WORKER_YOUNG_MB };
    let worker: Worker;
    try {
      worker = fromSource
        ? new Worker(
            `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ register }) => { register(); return import(${JSON.stringify(entry.href)}); })`,
            { eval: true, workerData: data, resourceLimits },
          )
        : new Worker(entry, { workerData: data, resourceLimits });
    } catch (err) {
      // E.g. the data cannot be cloned, or no thread can be started: still the envelope's 503.
      reject(failed(err instanceof Error ? err.message : String(err)));
      return;
    }
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      reject(failed(why));
    };
    const timer = setTimeout(() => fail(`no result within ${timeoutMs / 1000} s`), timeoutMs);
    timer.unref();
    worker.once('message', (value: TrackRecordData) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(value);
      void worker.terminate();
    });
    worker.once('error', (err) => fail(err instanceof Error ? err.message : String(err)));
    worker.once('exit', (code) => fail(`the worker exited with code ${code}`));
  });
}
