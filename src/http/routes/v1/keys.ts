import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { TIERS } from '../../../auth/tiers.ts';
import type { KeyService } from '../../../services/keys.ts';
import { ErrorEnvelopeSchema, okEnvelope, sendOk } from '../../envelope.ts';
import { signedInUser } from '../../guard.ts';
import { safeText } from '../../../services/schemas.ts';

const Tier = z.enum(TIERS);

export const CreatedKeySchema = z.object({
  id: z.uuid(),
  key: z.string().describe('The full API key: shown this once, never again'),
  prefix: z.string(),
  name: z.string(),
  tier: Tier,
  created_at: z.string(),
});

export const KeyListSchema = z.object({
  keys: z.array(
    z.object({
      id: z.uuid(),
      prefix: z.string(),
      name: z.string(),
      tier: Tier,
      status: z.enum(['active', 'revoked']),
      usage: z.object({ requests_today: z.number().int(), requests_total: z.number().int(), last_used_at: z.string().nullable() }),
      created_at: z.string(),
      revoked_at: z.string().nullable(),
    }),
  ),
});

export const RevokedKeySchema = z.object({ id: z.uuid(), status: z.literal('revoked'), revoked_at: z.string() });

const errors = { 400: ErrorEnvelopeSchema, 401: ErrorEnvelopeSchema, 404: ErrorEnvelopeSchema, 409: ErrorEnvelopeSchema, 429: ErrorEnvelopeSchema };
const jwtOnly = [{ bearerJwt: [] }];

/** Key management (JWT of a signed-in user only): POST /keys/create, GET /keys, POST /keys/revoke. */
export async function keyRoutes(app: FastifyInstance, opts: { keys: KeyService; asOf: string }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { keys, asOf } = opts;

  r.post('/keys/create', {
    config: { auth: 'jwt' },
    schema: {
      tags: ['keys'],
      summary: 'Create an API key (shown once)',
      description: 'At most 5 active keys per user. The response carries the full key; only its SHA-256 digest is stored.',
      security: jwtOnly,
      body: z.object({ name: safeText(1, 64).optional() }).strict().optional(),
      response: { 201: okEnvelope(CreatedKeySchema), ...errors },
    },
  }, async (req, reply) => {
    const created = await keys.create(signedInUser(req), req.body?.name);
    return sendOk(req, reply, JSON.stringify(created), false, asOf, 201);
  });

  r.get('/keys', {
    config: { auth: 'jwt' },
    schema: { tags: ['keys'], summary: "List the user's keys with usage", security: jwtOnly, response: { 200: okEnvelope(KeyListSchema), ...errors } },
  }, async (req, reply) => sendOk(req, reply, JSON.stringify(await keys.list(signedInUser(req))), false, asOf));

  r.post('/keys/revoke', {
    config: { auth: 'jwt' },
    schema: {
      tags: ['keys'],
      summary: 'Revoke a key (idempotent)',
      security: jwtOnly,
      body: z.object({ key_id: z.uuid({ error: 'must be a UUID' }) }),
      response: { 200: okEnvelope(RevokedKeySchema), ...errors },
    },
  }, async (req, reply) => sendOk(req, reply, JSON.stringify(await keys.revoke(signedInUser(req), req.body.key_id)), false, asOf));
}
