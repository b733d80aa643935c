import { z } from 'zod';
import { KEY_PREFIX } from '../../auth/api-keys.ts';
import { Instant, PageCursor, safeText, TierSchema } from './common.ts';

/** Schemas of self-service API keys: create (shown once), list with usage, revoke. */

/** Body of POST /keys/create. */
export const CreateKeyInput = z
  .object({ name: safeText(1, 64).optional().describe('A name to recognise the key by (default "default")') })
  .strict();

/** Body of POST /keys/revoke. */
export const RevokeKeyInput = z
  .object({
    key_id: z
      .uuid({
        // Never echoes the input: a pasted full key must not come back in an error.
        error: (iss) =>
          iss.input === undefined
            ? 'required: the id of the key to revoke, a UUID from GET /api/v1/keys'
            : typeof iss.input === 'string' && iss.input.startsWith(KEY_PREFIX)
              ? 'this is the key itself: give its id instead, the UUID that GET /api/v1/keys lists beside its prefix'
              : 'must be the id of a key, a UUID from GET /api/v1/keys',
      })
      .describe('The id of the key to revoke (from GET /keys)'),
  })
  .strict();

/** `data` of POST /keys/create: the full key, shown this once. */
export const CreatedKeySchema = z.object({
  id: z.uuid(),
  key: z.string().describe('The full API key: shown this once, never again'),
  prefix: z.string().describe('`svc_live_` and the first 4 random characters, to recognise the key in lists'),
  name: z.string(),
  tier: TierSchema,
  created_at: Instant.describe('ISO 8601 UTC'),
});

/** One key as listed to its owner (never the key itself). */
export const KeyViewSchema = z.object({
  id: z.uuid(),
  prefix: z.string(),
  name: z.string(),
  tier: TierSchema,
  status: z.enum(['active', 'revoked']),
  usage: z.object({
    requests_today: z.number().int().describe('Requests served today (UTC)'),
    requests_total: z.number().int(),
    last_used_at: Instant.nullable().describe('ISO 8601 UTC; null when never used'),
  }),
  created_at: Instant,
  revoked_at: Instant.nullable(),
});

/** Page sizes of GET /keys: the most a page may hold, and the default. */
export const KEY_PAGE = { max: 100, default: 50 } as const;

/** Input of the listKeys operation (GET /keys). */
export const ListKeysInput = z.object({
  limit: z
    .number()
    .int()
    .min(1)
    .max(KEY_PAGE.max)
    .default(KEY_PAGE.default)
    .describe(`The most keys a page holds, 1..${KEY_PAGE.max}; the active keys (at most 5) come first`),
  cursor: PageCursor.optional(),
});

/** `data` of GET /keys. */
export const KeyListSchema = z.object({
  keys: z.array(KeyViewSchema).describe('Active keys first, then revoked ones; each group newest first'),
  limit: z.number().int().describe('The most keys a page holds'),
  next_cursor: z.string().nullable().describe('Pass it as `cursor` for the next page (older keys); null on the last page'),
});

/** `data` of POST /keys/revoke. */
export const RevokedKeySchema = z.object({ id: z.uuid(), status: z.literal('revoked'), revoked_at: Instant });

/** Types of the schemas above. */
export type CreatedKey = z.infer<typeof CreatedKeySchema>;
export type KeyView = z.infer<typeof KeyViewSchema>;
export type RevokedKey = z.infer<typeof RevokedKeySchema>;
