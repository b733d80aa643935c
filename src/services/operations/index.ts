import type { Operation } from '../operation.ts';
import { createKey, listKeys, revokeKey } from './keys.ts';
import {
  getChainHealth,
  getChainMetrics,
  getPrices,
  getRegime,
  getSignal,
  getSignalHistory,
  getStatus,
  getTrackRecord,
  listAssets,
  listChainHealth,
  listSignals,
} from './market.ts';
import { createThesis, deleteThesis, getThesis, getThesisHealth, listTheses } from './theses.ts';

export * from './keys.ts';
export * from './market.ts';
export * from './theses.ts';

/** Every public operation of the service (REST serves all of them; MCP tools wrap eight of them: the read-only market ones except getChainMetrics and getPrices, and getThesisHealth). */
export const OPERATIONS: readonly Operation[] = [
  listSignals,
  getSignal,
  getRegime,
  listChainHealth,
  getChainHealth,
  getChainMetrics,
  listAssets,
  getSignalHistory,
  getStatus,
  getPrices,
  getTrackRecord,
  createKey,
  listKeys,
  revokeKey,
  createThesis,
  listTheses,
  getThesis,
  deleteThesis,
  getThesisHealth,
] as Operation[];
