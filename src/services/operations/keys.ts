import { signedInUser, USER } from '../access.ts';
import { defineOperation, fresh } from '../operation.ts';
import { CreatedKeySchema, CreateKeyInput, KeyListSchema, ListKeysInput, RevokedKeySchema, RevokeKeyInput } from '../schemas/keys.ts';

/** Self-service API keys, for the signed-in user (JWT) only. */

export const createKey = defineOperation({
  name: 'createKey',
  tag: 'keys',
  summary: 'Create an API key (shown once)',
  description: 'At most 5 active keys per user. The response carries the full key, shown this once; only its SHA-256 digest is stored.',
  policy: USER,
  errors: ['KEY_LIMIT_REACHED'],
  input: CreateKeyInput,
  output: CreatedKeySchema,
  status: 201,
  run: async (s, caller, input) => fresh(await s.keys.create(signedInUser(caller), input.name)),
});

export const listKeys = defineOperation({
  name: 'listKeys',
  tag: 'keys',
  summary: "List the user's keys with usage",
  description:
    "The keys of the signed-in user, active and revoked, with each one's prefix (never the key), tier and usage (today, total, last used): active keys first, then revoked ones, each newest first, `limit` per page; to page on, ask again with `cursor` = `next_cursor` until it is null.",
  policy: USER,
  input: ListKeysInput,
  output: KeyListSchema,
  run: async (s, caller, input) => fresh(await s.keys.list(signedInUser(caller), { limit: input.limit, cursor: input.cursor })),
});

export const revokeKey = defineOperation({
  name: 'revokeKey',
  tag: 'keys',
  summary: 'Revoke a key (idempotent)',
  description:
    "The key is refused on its next request, on every instance. Revoking a revoked key changes nothing; another user's key is 404.",
  policy: USER,
  errors: ['NOT_FOUND'],
  input: RevokeKeyInput,
  output: RevokedKeySchema,
  run: async (s, caller, input) => fresh(await s.keys.revoke(signedInUser(caller), input.key_id)),
});
