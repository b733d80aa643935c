import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ThesisHealthSchema, ThesisInputSchema, ThesisListSchema, ThesisSchema, type ThesisService } from '../../../services/theses.ts';
import { ErrorEnvelopeSchema, okEnvelope, sendOk } from '../../envelope.ts';
import { signedInUser } from '../../guard.ts';

const errors = { 400: ErrorEnvelopeSchema, 401: ErrorEnvelopeSchema, 404: ErrorEnvelopeSchema, 429: ErrorEnvelopeSchema, 500: ErrorEnvelopeSchema };
const keyOrJwt: { [name: string]: string[] }[] = [{ bearerApiKey: [] }, { bearerJwt: [] }];
const IdParam = z.object({ id: z.string().min(1).max(64).describe('Thesis id (UUID)') });

/**
 * Thesis routes (API key or JWT; owner only, another user's thesis is 404): POST /thesis,
 * GET /thesis, GET /thesis/{id}, DELETE /thesis/{id}, GET /thesis/{id}/health.
 */
export async function thesisRoutes(app: FastifyInstance, opts: { theses: ThesisService; asOf: string }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { theses, asOf } = opts;

  r.post('/thesis', {
    config: { auth: 'user' },
    schema: {
      tags: ['thesis'],
      summary: 'Create a thesis',
      description: 'A trade idea on one asset: direction, optional entry/target/stop prices, and conditions over price_usd, change_7d_pct, rsi_14, signal, signal_score, regime, fear_greed, funding_rate, chain_health_score.',
      security: keyOrJwt,
      body: ThesisInputSchema,
      response: { 201: okEnvelope(ThesisSchema), ...errors },
    },
  }, async (req, reply) => {
    const o = signedInUser(req);
    const t = await theses.create(o.userId, o.email, req.body);
    return sendOk(req, reply, JSON.stringify(t), false, asOf, 201);
  });

  r.get('/thesis', {
    config: { auth: 'user' },
    schema: { tags: ['thesis'], summary: "List the caller's theses", security: keyOrJwt, response: { 200: okEnvelope(ThesisListSchema), ...errors } },
  }, async (req, reply) => sendOk(req, reply, JSON.stringify(await theses.list(signedInUser(req).userId)), false, asOf));

  r.get('/thesis/:id', {
    config: { auth: 'user' },
    schema: { tags: ['thesis'], summary: 'One thesis (owner only)', security: keyOrJwt, params: IdParam, response: { 200: okEnvelope(ThesisSchema), ...errors } },
  }, async (req, reply) => sendOk(req, reply, JSON.stringify(await theses.get(signedInUser(req).userId, req.params.id)), false, asOf));

  r.delete('/thesis/:id', {
    config: { auth: 'user' },
    schema: {
      tags: ['thesis'],
      summary: 'Delete a thesis (owner only)',
      security: keyOrJwt,
      params: IdParam,
      response: { 200: okEnvelope(z.object({ id: z.string(), deleted: z.literal(true) })), ...errors },
    },
  }, async (req, reply) => sendOk(req, reply, JSON.stringify(await theses.delete(signedInUser(req).userId, req.params.id)), false, asOf));

  r.get('/thesis/:id/health', {
    config: { auth: 'user' },
    schema: {
      tags: ['thesis'],
      summary: 'Evaluate a thesis against current data (owner only)',
      description: 'Health score 0..100, status, triggered conditions and the action-required flag (an invalidation holds, the stop is hit, or the score is below 40). Method: docs/methodology.md.',
      security: keyOrJwt,
      params: IdParam,
      response: { 200: okEnvelope(ThesisHealthSchema), ...errors },
    },
  }, async (req, reply) => sendOk(req, reply, JSON.stringify(await theses.health(signedInUser(req).userId, req.params.id)), false, asOf));
}
