import { z } from 'zod';
import { TIERS } from '../../auth/tiers.ts';
import { CHAIN_IDS, REGIME_LEVELS, SIGNAL_LEVELS } from '../../engine/types.ts';

/** Schemas shared by every resource: days, the engine's value sets, tiers, user text. */

/**
 * User-supplied text (names, titles, ids): trimmed, and without control characters, which
 * PostgreSQL refuses in text and jsonb (NUL) or which would only hide content.
 */
export function safeText(min: number, max: number) {
  return (
    z
      .string()
      .trim()
      .min(min)
      .max(max)
      // eslint-disable-next-line no-control-regex -- control characters are what this refuses
      .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), { error: 'must not contain control characters' })
  );
}

/** A UTC calendar day, YYYY-MM-DD. */
export const Day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/)
  .describe('UTC calendar day, YYYY-MM-DD');
/** The five signal levels (TradingView's technical-rating scale), strongest buy first. */
export const SignalLevel = z.enum(SIGNAL_LEVELS);
/** BTC market regimes. */
export const RegimeLevel = z.enum(REGIME_LEVELS);
/** Chains with health scores and metrics: Ethereum, Solana, Hyperliquid. */
export const ChainId = z.enum(CHAIN_IDS);
/** Tiers: unauthenticated, free, pro, api. */
export const TierSchema = z.enum(TIERS);
