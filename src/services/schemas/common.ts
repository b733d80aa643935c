import { z } from 'zod';
import { TIERS } from '../../auth/tiers.ts';
import { CHAIN_IDS, REGIME_LEVELS, SIGNAL_LEVELS } from '../../engine/types.ts';
import { isCalendarDay } from '../../engine/util.ts';

/** Schemas shared by every resource: days, the engine's value sets, tiers, user text. */

/** A bound as people write it: 1e12 rather than 1000000000000. */
export const bound = (n: number | bigint | Date): string =>
  typeof n === 'number' && Math.abs(n) >= 1e9 ? n.toExponential().replace('e+', 'e') : String(n);

/** What a value is, for "got ...": a string, a number, an array, null, NaN. */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number' && Number.isNaN(v)) return 'not a number';
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer' : `${v}`;
  return { string: 'a string', boolean: 'a boolean', object: 'an object' }[typeof v as string] ?? typeof v;
}

/** A value given, as JSON, at most 40 characters of it (an error message does not echo a megabyte back). */
function shown(v: unknown): string {
  const json = JSON.stringify(v) ?? String(v);
  return json.length <= 40 ? json : `${json.slice(0, 40)}… (${json.length} characters)`;
}

/** The expected type, as a phrase: "a number", "an integer". */
const EXPECTED: Record<string, string> = {
  number: 'a number',
  int: 'an integer',
  string: 'a string',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
};

// Plain messages for REST bodies and query strings, MCP arguments and the configuration,
// which name the field in front ("Invalid body field 'entry_price': must be above 0"); zod's
// defaults ("Too small: expected number to be >0", "expected string, received undefined")
// are written for developers reading a schema. A missing field says it is required. Set
// once here, where every schema module's shared pieces come from; a schema's own message
// still wins.
z.config({
  customError: (iss) => {
    if (iss.input === undefined) {
      if (iss.code === 'invalid_type') return `required, expected ${iss.expected}`;
      if (iss.code === 'invalid_value') return `required, expected one of ${iss.values.map((v) => JSON.stringify(v)).join('|')}`;
      return undefined;
    }
    switch (iss.code) {
      case 'invalid_type':
        return EXPECTED[iss.expected] ? `must be ${EXPECTED[iss.expected]}, got ${kindOf(iss.input)}` : undefined;
      case 'invalid_value':
        return `must be one of ${iss.values.map((v) => JSON.stringify(v)).join('|')}, got ${shown(iss.input)}`;
      case 'too_small':
        if (iss.origin === 'number' || iss.origin === 'int')
          return `must be ${iss.inclusive ? 'at least' : 'above'} ${bound(iss.minimum)}, got ${bound(iss.input as number)}`;
        if (iss.origin === 'string')
          return Number(iss.minimum) === 1 ? 'must not be empty' : `must have at least ${bound(iss.minimum)} characters`;
        if (iss.origin === 'array') return `must hold at least ${bound(iss.minimum)} item${Number(iss.minimum) === 1 ? '' : 's'}`;
        return undefined;
      case 'too_big':
        if (iss.origin === 'number' || iss.origin === 'int')
          return `must be ${iss.inclusive ? 'at most' : 'below'} ${bound(iss.maximum)}, got ${bound(iss.input as number)}`;
        if (iss.origin === 'string') return `must have at most ${bound(iss.maximum)} characters`;
        if (iss.origin === 'array') return `must hold at most ${bound(iss.maximum)} items`;
        return undefined;
      default:
        return undefined;
    }
  },
});

/**
 * Characters user-supplied text may not hold, by Unicode general category (so that no
 * character of a class slips through a hand-made list):
 * - Cc, control characters (PostgreSQL refuses NUL in text and jsonb; the others only hide content);
 * - Cf, invisible formatting: the zero-width space, bidirectional marks (U+200E/F, U+061C),
 *   overrides and isolates, the soft hyphen, the byte-order mark, and the tag characters
 *   (U+E0000-U+E007F), which spell invisible ASCII that an AI agent reading the text through
 *   MCP would still read (Unicode TR #36, "Bidirectional Text Spoofing");
 * - Cs, an unpaired surrogate (not a character: it is stored as U+FFFD);
 * - Zl and Zp, the line and paragraph separators;
 * - the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0), letters that draw nothing.
 * The zero-width joiner and non-joiner (U+200D, U+200C, Cf) are allowed: emoji sequences and
 * Persian and Indic spelling need them; so are tag characters inside an emoji tag sequence (the
 * flags of England, Scotland and Wales): see hasUnsafeText, which applies this. (A `v`-flag set
 * difference; built from a string because the compile target predates the flag, which Node 20
 * and later support.)
 */
export const UNSAFE_TEXT = new RegExp('[[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Zl}\\p{Zp}\\u115f\\u1160\\u3164\\uffa0]--[\\u200c\\u200d]]', 'v');
/** The emoji tag sequences (Unicode's RGI list: the subdivision flags), whose tag characters are no hidden text. */
const EMOJI_TAG_SEQUENCE = new RegExp('\\p{RGI_Emoji_Tag_Sequence}', 'gv');

/** Whether user-supplied text holds a character of {@link UNSAFE_TEXT} outside an emoji tag sequence. */
export function hasUnsafeText(s: string): boolean {
  return UNSAFE_TEXT.test(s.includes('\u{E007F}') ? s.replace(EMOJI_TAG_SEQUENCE, '') : s);
}

/** The message for text that holds {@link UNSAFE_TEXT}. */
export const UNSAFE_TEXT_MESSAGE = 'must not contain control or invisible formatting characters (or an unpaired surrogate)';

/** User-supplied text (names, titles, ids): trimmed, and without {@link UNSAFE_TEXT}. */
export function safeText(min: number, max: number) {
  return z
    .string()
    .trim()
    .min(min)
    .max(max)
    .refine((s) => !hasUnsafeText(s), { error: UNSAFE_TEXT_MESSAGE });
}

/**
 * An object schema that refuses the keys it does not declare, naming them and the accepted
 * ones: `Unknown query parameter 'as_of'; accepted: include_factors`. Used for every REST
 * query string and MCP tool's arguments (src/http/route.ts, src/mcp/tool.ts): an unknown key
 * (a misspelt `include_factor`, an unsupported `as_of` or `from`) would otherwise be ignored,
 * and the answer would look like one to the question asked.
 * @param schema the object (none: no keys at all); one with object-level checks is refused.
 * @param what what the keys are to the caller: 'query parameter' (REST), 'argument' (MCP).
 * @throws Error when `schema` has object-level checks (at registration, not per request).
 */
export function closedObject<S extends z.ZodRawShape>(schema: z.ZodObject<S> | undefined, what: string) {
  // Rebuilt from the shape: object-level checks (refine, superRefine) would be dropped silently.
  if (schema?._zod.def.checks?.length)
    throw new Error(`closedObject: a ${what} schema with object-level checks cannot be closed from its shape`);
  const shape = schema?.shape ?? ({} as S);
  const names = Object.keys(shape);
  const accepted = names.length > 0 ? `accepted: ${names.join(', ')}` : `this takes no ${what}s`;
  return z.strictObject(shape, {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `Unknown ${what}${iss.keys.length > 1 ? 's' : ''} ${iss.keys.map((k) => `'${k}'`).join(', ')}; ${accepted}`
        : undefined,
  });
}

/** A UTC calendar day, YYYY-MM-DD. */
export const Day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/)
  .describe('UTC calendar day, YYYY-MM-DD');
/**
 * A day given by a caller (a query parameter or tool argument): YYYY-MM-DD and a day that
 * exists (Date.parse would roll 2025-02-30 over to March 2).
 */
export const InputDay = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, { error: 'must be a day YYYY-MM-DD' })
  // Zod runs the check after a failed pattern too; isCalendarDay refuses any malformed text.
  .refine(isCalendarDay, { error: (iss) => `${String(iss.input).slice(0, 10)} is not a calendar day; give a day that exists, YYYY-MM-DD` });
/**
 * An instant as the service writes it (`Date#toISOString()`: ISO 8601 UTC with milliseconds),
 * typed `format: date-time` in the OpenAPI document and the MCP tools' output schemas so that
 * a generated client knows it for a timestamp (docs/openapi.md). An output annotation only:
 * nothing parses the service's own answers with it.
 */
export const Instant = z.string().meta({ format: 'date-time' });

/** The five signal levels (TradingView's technical-rating scale), strongest buy first. */
export const SignalLevel = z.enum(SIGNAL_LEVELS);
/** BTC market regimes. */
export const RegimeLevel = z.enum(REGIME_LEVELS);
/** Chains with health scores and metrics: Ethereum, Solana, Hyperliquid. */
export const ChainId = z.enum(CHAIN_IDS);
/** Tiers: unauthenticated, free, pro, api. */
export const TierSchema = z.enum(TIERS);

/** `cursor` of a paged list (GET /thesis, GET /keys): a page's `next_cursor`, passed back unchanged (services/cursor.ts). */
export const PageCursor = z
  .string()
  .min(1)
  .max(200)
  .describe("The previous page's `next_cursor`, unchanged; leave it out for the first page");
