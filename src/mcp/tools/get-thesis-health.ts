import { z } from 'zod';
import { getThesisHealth } from '../../services/operations/theses.ts';
import { ThesisHealthSchema, type ThesisHealthData } from '../../services/schemas/theses.ts';
import { defineTool } from '../tool.ts';
import { count, staleNote } from './format.ts';

/** get_thesis_health: getThesisHealth (API key; owner only). */
export const getThesisHealthTool = defineTool({
  name: 'get_thesis_health',
  title: 'Thesis health',
  description:
    "Evaluates one of the caller's saved theses against current data (theses are created and listed over REST, POST and GET /api/v1/thesis, or on the dashboard's /account page; no MCP tool lists them): health score 0..100, status (healthy, weakening, at_risk, invalidated), triggered conditions and whether action is required. Needs an API key; only the thesis owner may call it. Same data as GET /api/v1/thesis/{id}/health.",
  input: z.object({ thesis_id: z.string().min(1).max(64).describe('The thesis id (UUID)') }),
  output: ThesisHealthSchema,
  route: (a) => ({ op: getThesisHealth, input: { id: a.thesis_id } }),
  summary(h: ThesisHealthData): string {
    const trig = h.triggered_conditions.length
      ? `; triggered: ${h.triggered_conditions.map((c) => `${c.metric} ${c.operator} ${c.value} (now ${c.current_value}, ${c.kind})`).join(', ')}`
      : '';
    const hits = [h.stop_hit ? 'stop hit' : '', h.target_hit ? 'target hit' : ''].filter(Boolean).join(', ');
    const horizon = h.horizon
      ? h.horizon.passed
        ? ` Horizon passed on ${h.horizon.ends_at}: review the thesis.`
        : ` Horizon ends ${h.horizon.ends_at} (${count(h.horizon.days_left, 'day')} left).`
      : '';
    const unevaluable = h.unevaluable_conditions.length
      ? ` Not evaluated (no data): ${h.unevaluable_conditions.map((c) => `${c.metric} (${c.reason})`).join('; ')}.`
      : '';
    return `Thesis ${h.thesis_id} (${h.direction} ${h.asset}): ${h.status}, health ${h.health_score ?? 'n/a'}/100, action required: ${h.action_required ? 'yes' : 'no'}${hits ? ` (${hits})` : ''}${trig}. As of ${h.as_of}.${staleNote(h)}${horizon}${unevaluable}`;
  },
});
