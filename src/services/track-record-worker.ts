/**
 * Worker-thread entry started by `trackRecordOffThread` (services/track-record-thread.ts) for
 * `MarketService.trackRecord` (services/market.ts): computes the
 * published track record (services/backtest.ts `trackRecord`: the walk-forward backtest, a few
 * seconds of CPU over several whole-history signal series) from the MarketData it is handed,
 * so that the main thread keeps answering requests meanwhile. It computes the regime and
 * chain-health series again from the data, as every signal series needs them, instead of
 * receiving the main thread's.
 *
 * workerData: the MarketData the served state was computed from (a structured clone).
 * Posts one message, the TrackRecord; an exception ends the worker with an 'error' event.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { MarketData } from '../providers/port.ts';
import { trackRecord } from './backtest.ts';
import { MarketService } from './market.ts';

const data = workerData as MarketData;
const market = await MarketService.create({ name: 'track record worker', load: async () => data }, null);
parentPort!.postMessage(trackRecord(market));
