/**
 * Regenerates src/http/openapi-examples.ts: the OpenAPI examples, taken from the service's
 * real output on the bundled dataset (in-memory database), shortened (arrays to their first
 * element, records to their first two entries). Run once after a change of the payloads:
 *   node --import tsx scripts/openapi-examples.ts
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from '../src/config.ts';
import { DATABASE_DOWN_MESSAGE, type ErrorCode, unavailable } from '../src/errors.ts';
import type { Caller } from '../src/services/access.ts';
import * as ops from '../src/services/operations/index.ts';
import type { Operation } from '../src/services/operation.ts';
import { MAX_THESES } from '../src/services/schemas/theses.ts';
import { createService } from '../src/server.ts';
import { testConfig } from '../test/helpers/env.ts';

const FIXED_TIME = '2025-09-30T12:00:00.000Z';
/** The request id of the examples' `meta`, written fixed (and kept as it is by `stable`). */
const EXAMPLE_REQUEST_ID = '9b2f6c1e-4d3a-4f7b-8a55-2f0c3e9d1a77';

/**
 * The generated text with its random values made fixed, so that a regeneration changes the
 * file only where the payloads changed: each distinct UUID (key, thesis and condition ids; the
 * request id of the examples' meta excepted, which is written fixed) becomes a UUIDv7 of
 * FIXED_TIME numbered by first appearance, and the example key's random part (its shown prefix
 * too) becomes a fixed readable string; the key keeps its EXAMPL ending, so it still fails
 * the checksum.
 */
function stable(text: string, exampleKey: string): string {
  const random = exampleKey.slice('svc_live_'.length, -'EXAMPL'.length);
  const fixedRandom = 'ExampleKeyNotRealReplaceWithYours'.padEnd(random.length, '0').slice(0, random.length);
  const fixedKey = `svc_live_${fixedRandom}EXAMPL`;
  let out = text.replaceAll(exampleKey, fixedKey).replaceAll(`"${exampleKey.slice(0, 13)}"`, `"${fixedKey.slice(0, 13)}"`);
  const time = Date.parse(FIXED_TIME).toString(16).padStart(12, '0');
  const ids = new Map<string, string>();
  out = out.replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, (id) => {
    if (id === EXAMPLE_REQUEST_ID) return id;
    if (!ids.has(id)) ids.set(id, `${time.slice(0, 8)}-${time.slice(8)}-7000-8000-${String(ids.size + 1).padStart(12, '0')}`);
    return ids.get(id)!;
  });
  return out;
}

/** Arrays to their first element, `metrics` records to their first two entries (unless `cut` is false); times fixed. */
function shorten(v: unknown, key = '', cut = true): unknown {
  if (Array.isArray(v)) return (cut ? v.slice(0, 1) : v).map((x) => shorten(x, '', cut));
  // Wall-clock times (created_at, evaluated_at, reset) to one fixed instant: stable regeneration.
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T[\d:.]+Z$/.test(v)) return FIXED_TIME;
  if (v && typeof v === 'object') {
    let entries = Object.entries(v);
    if (cut && key === 'metrics') entries = entries.slice(0, 2);
    const out = Object.fromEntries(entries.map(([k, x]) => [k, shorten(x, k, cut)]));
    // A thesis horizon ends `days` after the (fixed) created_at, as the service computes it.
    if (key === 'horizon' && typeof out.days === 'number')
      out.ends_at = new Date(Date.parse(FIXED_TIME) + out.days * 86_400_000).toISOString();
    return out;
  }
  return v;
}

const svc = await createService(testConfig());
await svc.app.ready();
try {
  const user: Caller = { kind: 'jwt', tier: 'free', subject: 'user:example-user', userId: 'example-user', email: 'ada@example.com' };
  /** The operation's `data` for `input`, whole. */
  const answer = async (op: Operation, input: unknown) => (await op.run(svc, user, op.input.parse(input) as never)).value;
  const run = async (op: Operation, input: unknown) => shorten(await answer(op, input));
  const success: Record<string, unknown> = {};
  success.listSignals = await run(ops.listSignals, { include_factors: false });
  success.getSignal = await run(ops.getSignal, { asset: 'bitcoin', include_factors: true });
  success.getRegime = await run(ops.getRegime, {});
  success.listChainHealth = await run(ops.listChainHealth, {});
  success.getChainHealth = await run(ops.getChainHealth, { chain: 'eth' });
  success.getChainMetrics = await run(ops.getChainMetrics, { chain: 'eth' });
  success.listAssets = await run(ops.listAssets, {});
  success.getSignalHistory = await run(ops.getSignalHistory, { asset: 'bitcoin', days: 90, limit: 50 });
  success.getStatus = await run(ops.getStatus, {});
  success.getPrices = await run(ops.getPrices, { asset: 'bitcoin', days: 30 });
  success.getTrackRecord = await run(ops.getTrackRecord, {});
  const key = (await ops.createKey.run(svc, user, { name: 'laptop' })).value;
  // The example key must fail the checksum (test/http/openapi.test.ts): no secret scanner or
  // reader may take it for a real key. Its last characters spell EXAMPL instead.
  success.createKey = shorten({ ...key, key: `${key.key.slice(0, -6)}EXAMPL` });
  success.listKeys = await run(ops.listKeys, {});
  const thesis = (
    await ops.createThesis.run(
      svc,
      user,
      ops.createThesis.input.parse({
        asset: 'BTC',
        direction: 'long',
        title: 'BTC holds the 200-day average',
        entry_price: 95000,
        stop_price: 88000,
        target_price: 120000,
        horizon_days: 90,
        conditions: [{ id: 'rsi-hot', metric: 'rsi_14', operator: 'gt', value: 75, kind: 'warning' }],
      }),
    )
  ).value;
  success.createThesis = shorten(thesis);
  success.listTheses = await run(ops.listTheses, {});
  success.getThesis = await run(ops.getThesis, { id: thesis.id });
  // The health's components whole: cut to the first, its weight (0.5714) and score no longer
  // gave health_score (docs/methodology.md, "Thesis health").
  const health = (await answer(ops.getThesisHealth, { id: thesis.id })) as { components: unknown };
  success.getThesisHealth = { ...(shorten(health) as object), components: shorten(health.components, '', false) };
  success.deleteThesis = await run(ops.deleteThesis, { id: thesis.id });
  success.revokeKey = await run(ops.revokeKey, { key_id: key.id });

  // Errors: the real envelope where a request provokes it, else the service's own message.
  const errors: Partial<Record<ErrorCode, unknown>> = {};
  let ip = 0;
  const call = async (url: string, headers: Record<string, string> = {}, remoteAddress = `10.9.0.${++ip}`) => {
    const r = await svc.app.inject({ method: 'GET', url, headers, remoteAddress });
    return { status: r.statusCode, body: r.json() as { error: { code: ErrorCode } }, headers: r.headers };
  };
  const keep = (r: { body: { error: { code: ErrorCode } } }) => {
    errors[r.body.error.code] ??= shorten(r.body.error, '', false);
  };
  keep(await call('/api/v1/signals?include_factors=yes'));
  keep(await call('/api/v1/signals', { authorization: 'Bearer svc_live_not-a-real-key' }));
  const free = await svc.keys.create({ userId: 'example-free', email: 'free@example.com' }, 'free');
  keep(await call('/api/v1/signal-history/bitcoin', { authorization: `Bearer ${free.key}` }));
  keep(await call('/api/v1/signals/dogwifhat'));
  let limited: Awaited<ReturnType<typeof call>> | undefined;
  for (let i = 0; i < 20 && limited?.status !== 429; i++) limited = await call('/api/v1/regime', {}, '10.9.1.1');
  keep(limited!);
  errors.KEY_LIMIT_REACHED = {
    code: 'KEY_LIMIT_REACHED',
    message: 'You already have 5 active API keys; revoke one first',
    details: { max_active_keys: 5 },
  };
  errors.THESIS_LIMIT_REACHED = {
    code: 'THESIS_LIMIT_REACHED',
    message: `Your account has reached its limit of ${MAX_THESES} theses; delete one you no longer follow first`,
    details: { max_theses: MAX_THESES },
  };
  errors.INTERNAL_ERROR = { code: 'INTERNAL_ERROR', message: 'Internal server error' };
  const down = unavailable(DATABASE_DOWN_MESSAGE);
  errors.SERVICE_UNAVAILABLE = { code: down.code, message: down.message, details: down.details };
  const ok = await call('/api/v1/regime');
  const meta = {
    timestamp: FIXED_TIME,
    version: 'v1',
    cached: false,
    request_id: EXAMPLE_REQUEST_ID,
    as_of: svc.market.asOf,
  };
  const headers = Object.fromEntries(
    ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-service-tier', 'ratelimit-policy', 'ratelimit']
      .map((h) => [h, String(ok.headers[h])])
      .map(([h, v]) => [h, shorten(v)]),
  );
  headers['retry-after'] = String(limited!.headers['retry-after']);
  // The day window's seconds to its reset as at FIXED_TIME (noon UTC), not at the moment of the run.
  headers.ratelimit = headers.ratelimit!.replace(
    /("day";r=\d+;t=)\d+/,
    `$1${(Date.parse(FIXED_TIME.slice(0, 10)) + 86_400_000 - Date.parse(FIXED_TIME)) / 1000}`,
  );
  headers['www-authenticate-missing'] = 'Bearer realm="api"';

  const file = path.join(ROOT_DIR, 'src/http/openapi-examples.ts');
  writeFileSync(
    file,
    stable(
      `// Generated by scripts/openapi-examples.ts from the service's output on the bundled dataset (shortened); do not edit.\n\n` +
        `/** \`meta\` of the examples. */\nexport const EXAMPLE_META = ${JSON.stringify(meta, null, 2)} as const;\n\n` +
        `/** \`data\` of each operation's success response, by operationId. */\nexport const SUCCESS_EXAMPLES: Record<string, unknown> = ${JSON.stringify(success, null, 2)};\n\n` +
        `/** \`error\` of the error envelope, by code. */\nexport const ERROR_EXAMPLES: Record<string, { code: string; message: string; details?: Record<string, unknown> }> = ${JSON.stringify(errors, null, 2)};\n\n` +
        `/** Response header values (lower-case names). */\nexport const HEADER_EXAMPLES: Record<string, string> = ${JSON.stringify(headers, null, 2)};\n`,
      (success.createKey as { key: string }).key,
    ),
  );
  console.log(`wrote ${file}`);
} finally {
  await svc.stop();
}
