import { z } from 'zod';
import { API_KEY_OR_USER, signedInUser } from '../access.ts';
import { defineOperation, fresh } from '../operation.ts';
import {
  DeletedThesisSchema,
  ThesisHealthSchema,
  ThesisCursor,
  ThesisIdInput,
  ThesisInputSchema,
  ThesisListSchema,
  THESIS_PAGE,
  ThesisSchema,
} from '../schemas/theses.ts';

/** Theses: a user's trade ideas (API key or JWT; owner only, another user's thesis is 404). */

export const createThesis = defineOperation({
  name: 'createThesis',
  tag: 'theses',
  summary: 'Create a thesis',
  description:
    'A trade idea on one asset: direction, optional entry/target/stop prices, and conditions over price_usd, change_7d_pct, rsi_14, signal, signal_score, regime, fear_greed, funding_rate, chain_health_score.',
  policy: API_KEY_OR_USER,
  input: ThesisInputSchema,
  output: ThesisSchema,
  status: 201,
  errors: ['THESIS_LIMIT_REACHED'],
  run: async (s, caller, input) => {
    const u = signedInUser(caller);
    return fresh(await s.theses.create(u.userId, u.email, input));
  },
});

export const listTheses = defineOperation({
  name: 'listTheses',
  tag: 'theses',
  summary: "List the caller's theses",
  description:
    "The theses of the caller (the owner of the API key, or the signed-in user), newest first, `limit` per page; to page on, ask again with `cursor` = `next_cursor` until it is null. `include_health=true` adds each one's health (as GET /thesis/{id}/health), in one request.",
  policy: API_KEY_OR_USER,
  input: z.object({
    include_health: z.boolean().default(false).describe("Add each thesis's health, as GET /thesis/{id}/health answers it"),
    limit: z
      .number()
      .int()
      .min(1)
      .max(THESIS_PAGE.max)
      .default(THESIS_PAGE.default)
      .describe(`Maximum number of theses (1..${THESIS_PAGE.max})`),
    cursor: ThesisCursor.optional(),
  }),
  output: ThesisListSchema,
  run: async (s, caller, input) =>
    fresh(await s.theses.list(signedInUser(caller).userId, { withHealth: input.include_health, limit: input.limit, cursor: input.cursor })),
});

export const getThesis = defineOperation({
  name: 'getThesis',
  tag: 'theses',
  summary: 'One thesis (owner only)',
  description: "One of the caller's theses; another user's thesis is 404, as a missing one.",
  policy: API_KEY_OR_USER,
  errors: ['NOT_FOUND'],
  input: ThesisIdInput,
  output: ThesisSchema,
  run: async (s, caller, input) => fresh(await s.theses.get(signedInUser(caller).userId, input.id)),
});

export const deleteThesis = defineOperation({
  name: 'deleteThesis',
  tag: 'theses',
  summary: 'Delete a thesis (owner only)',
  description: "Deletes one of the caller's theses; afterwards it is 404.",
  policy: API_KEY_OR_USER,
  errors: ['NOT_FOUND'],
  input: ThesisIdInput,
  output: DeletedThesisSchema,
  run: async (s, caller, input) => fresh(await s.theses.delete(signedInUser(caller).userId, input.id)),
});

export const getThesisHealth = defineOperation({
  name: 'getThesisHealth',
  tag: 'theses',
  summary: 'Evaluate a thesis against current data (owner only)',
  description:
    'Health score 0..100, status, triggered conditions and the action-required flag (an invalidation holds, the stop is hit, or the score is below 40). When the asset has no current signal (its prices missing or stale, e.g. live mode with a failing source) the health cannot be told: 503 SERVICE_UNAVAILABLE says why. Method: docs/methodology.md, "Thesis health".',
  policy: API_KEY_OR_USER,
  errors: ['NOT_FOUND'],
  input: ThesisIdInput,
  output: ThesisHealthSchema,
  run: async (s, caller, input) => fresh(await s.theses.health(signedInUser(caller).userId, input.id)),
});
