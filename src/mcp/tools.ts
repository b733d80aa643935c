import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { HISTORY_TIERS, type Tier } from '../auth/tiers.ts';
import type { Caller } from '../http/guard.ts';
import { isDependencyDown, loggableError, ServiceError, type ErrorCode } from '../http/errors.ts';
import type { LimitDecision } from '../rate-limit/limiter.ts';
import type { MarketService } from '../services/market.ts';
import {
  AssetsDataSchema,
  ChainHealthListSchema,
  ChainHealthSchema,
  HistoryDataSchema,
  RegimeDataSchema,
  SignalEntrySchema,
  SignalsDataSchema,
  type AssetsData,
  type ChainHealthData,
  type HistoryData,
  type RegimeData,
  type SignalEntry,
  type SignalsData,
} from '../services/schemas.ts';
import { ThesisHealthSchema, type ThesisHealthData, type ThesisService } from '../services/theses.ts';

/** The names of the six MCP tools (DECISIONS.md "MCP server"). */
export const TOOL_NAMES = ['get_signals', 'get_market_regime', 'get_chain_health', 'get_thesis_health', 'get_assets', 'get_signal_history'] as const;
/** One of the six tool names. */
export type ToolName = (typeof TOOL_NAMES)[number];

/** Server name and version announced at `initialize`. */
export const MCP_SERVER_INFO = { name: 'market-intel', version: '1.0.0' } as const;

/** What a tool call runs with: the shared services, the caller, and the quota. */
export interface ToolContext {
  market: MarketService;
  theses: ThesisService;
  /** Who is calling (from the API key in `Authorization: Bearer`, or anonymous). */
  caller: Caller;
  /**
   * Re-checks the caller before each call (stdio, where one process serves one key for its
   * whole life: a revoked key or a changed tier must count at once).
   * @throws ServiceError UNAUTHORIZED when the key is no longer valid.
   */
  reauthenticate?(): Promise<Caller>;
  /**
   * Counts one request against the caller's quota (the same as a REST request) and returns
   * the decision; a refused call consumes nothing.
   */
  consume(): Promise<LimitDecision>;
  /** Records a served call for the key's usage counters. */
  served?(): void;
  /** Logs an unexpected failure (its message is not shown to the client). */
  logError?(err: unknown, tool: string): void;
}

/**
 * Output of get_signals: the REST `data` of GET /signals (`signals`, `unavailable`) when no
 * asset is given, or of GET /signals/{asset} (one signal entry) when one is. MCP needs a single
 * object schema, so both shapes' fields are listed as optional.
 */
export const GetSignalsOutput = SignalsDataSchema.partial().extend(SignalEntrySchema.partial().shape);
/** Output of get_chain_health: GET /chain-health's `{chains}` without `chain`, else one entry. */
export const GetChainHealthOutput = ChainHealthListSchema.partial().extend(ChainHealthSchema.partial().shape);

/** The error a failed tool call carries in its text content, as JSON (the REST error object). */
export interface ToolError {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

function failure(code: ErrorCode, message: string, details?: Record<string, unknown>): CallToolResult {
  const body: ToolError = { error: details ? { code, message, details } : { code, message } };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}

function pct(v: number | null | undefined): string {
  return v === null || v === undefined ? 'n/a' : `${v >= 0 ? '+' : ''}${v.toFixed(2)}%`;
}

function signalLine(s: SignalEntry): string {
  return `${s.symbol} ${s.signal} (score ${s.score.toFixed(2)}, confidence ${s.confidence.toFixed(2)}), $${s.price_usd}, 7d ${pct(s.change_7d_pct)}`;
}

/** Short human-readable summaries (the structured result is in structuredContent). */
const summary = {
  signals(d: SignalsData | SignalEntry): string {
    if ('signals' in d && Array.isArray(d.signals)) {
      const s = d as SignalsData;
      const asOf = s.signals[0]?.as_of ?? 'n/a';
      return [`Signals of ${s.signals.length} assets as of ${asOf}:`, ...s.signals.map((e) => `- ${signalLine(e)}`)].join('\n');
    }
    const e = d as SignalEntry;
    const factors = e.factors ? `\nFactors: ${e.factors.map((f) => `${f.name} ${f.contribution >= 0 ? '+' : ''}${f.contribution.toFixed(3)}`).join(', ')}` : '';
    return `${e.name}: ${signalLine(e)}; since ${e.since}, as of ${e.as_of}.${factors}`;
  },
  regime(d: RegimeData): string {
    const c = d.conditions;
    return `BTC regime ${d.regime} (score ${d.score.toFixed(2)}, confidence ${d.confidence.toFixed(2)}) since ${d.since}, as of ${d.as_of}. RSI-14 ${c.rsi?.value ?? 'n/a'}, Fear & Greed ${c.fear_greed ? `${c.fear_greed.value} (${c.fear_greed.classification})` : 'n/a'}, 30d return ${pct(c.momentum?.return_30d_pct)}, funding rate ${c.funding_rate ? `${c.funding_rate.value} per 8 h (${c.funding_rate.state})` : 'n/a'}.`;
  },
  health(h: ChainHealthData): string {
    return `${h.name} (${h.chain}): ${h.status}, score ${h.score ?? 'n/a'}, z-score ${h.z_score ?? 'n/a'}, regime ${h.regime} (sensitivity ${h.sensitivity}), as of ${h.as_of ?? 'n/a'}`;
  },
  assets(d: AssetsData): string {
    return [`${d.assets.length} supported assets:`, ...d.assets.map((a) => `- ${a.asset} (${a.symbol}): ${a.signal ?? 'no signal'}${a.chain ? `, chain ${a.chain}` : ''}`)].join('\n');
  },
  history(d: HistoryData): string {
    const head = `${d.entries.length} signal changes of ${d.asset} in the last ${d.days} days (limit ${d.limit})`;
    return [head + (d.entries.length ? ':' : '.'), ...d.entries.map((e) => `- ${e.changed_at}: ${e.previous_signal ?? 'none'} -> ${e.signal} (score ${e.score.toFixed(2)}, $${e.price_usd})`)].join('\n');
  },
  thesis(h: ThesisHealthData): string {
    const trig = h.triggered_conditions.length ? `; triggered: ${h.triggered_conditions.map((c) => `${c.metric} ${c.operator} ${c.value} (now ${c.current_value}, ${c.kind})`).join(', ')}` : '';
    return `Thesis ${h.thesis_id} (${h.direction} ${h.asset}): ${h.status}, health ${h.health_score ?? 'n/a'}/100, action required: ${h.action_required ? 'yes' : 'no'}${trig}. As of ${h.as_of}.`;
  },
};

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

/**
 * Runs one tool call: checks the caller's credentials and tier, counts the call against the
 * quota, runs the service function and returns its data as structuredContent plus a text
 * summary. Failures are `isError` results whose text is `{"error": {code, message, details?}}`
 * with the REST error code; refused calls (UNAUTHORIZED, TIER_REQUIRED, RATE_LIMITED)
 * consume no quota.
 */
async function run<T extends object>(
  ctx: ToolContext,
  tool: ToolName,
  gate: { needsKey?: boolean; tiers?: readonly Tier[] },
  fn: () => T | Promise<T>,
  text: (d: T) => string,
): Promise<CallToolResult> {
  let c = ctx.caller;
  if (ctx.reauthenticate) {
    try {
      c = await ctx.reauthenticate();
    } catch (e) {
      if (e instanceof ServiceError) return failure(e.code, e.message, e.details);
      throw e;
    }
  }
  if (gate.needsKey && c.kind === 'anonymous') {
    return failure('UNAUTHORIZED', 'This tool needs an API key: configure the MCP client with the header Authorization: Bearer svc_live_... (stdio: MARKET_INTEL_API_KEY)');
  }
  if (gate.tiers && !gate.tiers.includes(c.tier)) {
    return failure('TIER_REQUIRED', `This tool needs the ${gate.tiers.join(' or ')} tier; your tier is ${c.tier}`, { required_tiers: gate.tiers, tier: c.tier });
  }
  const d = await ctx.consume();
  if (!d.allowed) {
    const x = d.exceeded!;
    return failure('RATE_LIMITED', `Rate limit exceeded: ${x.limit} requests per ${x.window} for the ${c.tier} tier`, {
      window: x.window,
      limit: x.limit,
      reset: x.reset.toISOString(),
      retry_after: x.retryAfterSec,
    });
  }
  ctx.served?.();
  try {
    const data = await fn();
    return { structuredContent: data as Record<string, unknown>, content: [{ type: 'text', text: text(data) }] };
  } catch (e) {
    if (e instanceof ServiceError) return failure(e.code, e.message, e.details);
    ctx.logError?.(loggableError(e), tool);
    if (isDependencyDown(e)) return failure('SERVICE_UNAVAILABLE', 'The service cannot reach its database; try again shortly');
    return failure('INTERNAL_ERROR', 'Internal error');
  }
}

/**
 * Errors the SDK raises itself before or after a tool runs (unknown tool, arguments that fail
 * the input schema, output that fails the output schema) become results in the same format
 * as ours: arguments -> INVALID_PARAMETER with the SDK's message (it names the field),
 * unknown tool -> NOT_FOUND, anything else -> INTERNAL_ERROR without internals.
 */
function sdkToolError(message: string, logError: (err: unknown) => void): CallToolResult {
  const text = message.replace(/^MCP error -?\d+: /, '');
  if (text.startsWith('Input validation error')) return failure('INVALID_PARAMETER', text);
  if (/^Tool \S+ not found$/.test(text)) return failure('NOT_FOUND', text);
  logError(new Error(message));
  return failure('INTERNAL_ERROR', 'Internal error');
}

/**
 * One JSON Schema validator for every server: the SDK otherwise builds a new Ajv instance per
 * server, which is most of the cost of a stateless request (it caches compiled schemas, so
 * sharing it is safe).
 */
const JSON_SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

const AssetArg = z.string().min(1).max(64).describe('Asset id (e.g. "bitcoin") or ticker ("BTC"), any case; see get_assets');

/**
 * Input schemas of the tools, with the same bounds as the REST parameters. Built once: zod
 * schemas are costly to construct, and a stateless HTTP server builds its tools per request.
 */
const INPUT = {
  none: z.object({}),
  get_signals: z.object({
    asset: AssetArg.optional().describe('One asset id or ticker; omit for all assets'),
    include_factors: z.boolean().default(false).describe('Add the factor breakdown'),
  }),
  get_chain_health: z.object({ chain: z.string().min(1).max(64).optional().describe('eth, sol or hype (asset ids and tickers accepted); omit for all') }),
  get_thesis_health: z.object({ thesis_id: z.string().min(1).max(64).describe('The thesis id (UUID)') }),
  get_signal_history: z.object({
    asset: AssetArg,
    days: z.number().int().min(1).max(365).default(30).describe('History period in days, ending at the as-of day (1..365)'),
    limit: z.number().int().min(1).max(200).default(50).describe('Maximum number of entries (1..200)'),
  }),
} as const;

/**
 * Builds an MCP server with exactly the six read-only tools, each a thin adapter over the
 * same service function as its REST route, so `structuredContent` equals the REST `data`.
 * One server serves one caller (stateless HTTP builds one per request; stdio one per process).
 */
export function createMcpServer(ctx: ToolContext): McpServer {
  const server = new McpServer(MCP_SERVER_INFO, {
    jsonSchemaValidator: JSON_SCHEMA_VALIDATOR,
    capabilities: { tools: { listChanged: false } },
    instructions:
      'Crypto market intelligence computed from daily market data: five-level trading signals with the factors behind them, the BTC market regime, on-chain health of Ethereum, Solana and Hyperliquid, signal-change history and thesis health. All tools are read-only. Data is daily; `as_of` says which day.',
  });
  const { market, theses } = ctx;
  // createToolError is private in the SDK's types; it formats every error the SDK catches.
  (server as unknown as { createToolError: (message: string) => CallToolResult }).createToolError = (message) =>
    sdkToolError(message, (err) => ctx.logError?.(err, 'sdk'));

  server.registerTool(
    'get_signals',
    {
      title: 'Trading signals',
      description:
        'Current trading signal (strong_buy, buy, neutral, sell, strong_sell) with composite score (-1..1), confidence, price and 24h/7d change, for one asset or for all supported assets. Set include_factors to get the explained breakdown (trend, momentum, RSI, Fear & Greed, funding rate, chain health, regime), whose contributions sum to the score. Same data as GET /api/v1/signals and /signals/{asset}.',
      inputSchema: INPUT.get_signals,
      outputSchema: GetSignalsOutput,
      annotations: READ_ONLY,
    },
    async ({ asset, include_factors }) =>
      run<SignalsData | SignalEntry>(
        ctx,
        'get_signals',
        {},
        () => (asset === undefined ? market.signals(include_factors).value : market.signal(asset, include_factors).value),
        summary.signals,
      ),
  );

  server.registerTool(
    'get_market_regime',
    {
      title: 'BTC market regime',
      description:
        'The BTC market regime (bull, bear or neutral, with hysteresis) and the conditions behind it: RSI-14, Fear & Greed index, momentum (30-day return, price vs SMA-200) and funding rate, plus the signals of all assets. Same data as GET /api/v1/regime.',
      inputSchema: INPUT.none,
      outputSchema: RegimeDataSchema,
      annotations: READ_ONLY,
    },
    async () => run(ctx, 'get_market_regime', {}, () => market.regime().value, summary.regime),
  );

  server.registerTool(
    'get_chain_health',
    {
      title: 'On-chain health',
      description:
        'Fundamental on-chain health score (0..100, 50 = normal) of Ethereum (eth), Solana (sol) and Hyperliquid (hype): z-scores of TVL, DEX volume, fees, active addresses and similar metrics against their trailing distribution, with regime-adjusted sensitivity. Omit chain for all three. Same data as GET /api/v1/chain-health and /chain-health/{asset}.',
      inputSchema: INPUT.get_chain_health,
      outputSchema: GetChainHealthOutput,
      annotations: READ_ONLY,
    },
    async ({ chain }) =>
      run<{ chains: ChainHealthData[] } | ChainHealthData>(
        ctx,
        'get_chain_health',
        {},
        () => (chain === undefined ? market.chainHealth().value : market.chainHealthOf(chain).value),
        (d) => ('chains' in d ? d.chains.map(summary.health).join('\n') : summary.health(d)),
      ),
  );

  server.registerTool(
    'get_thesis_health',
    {
      title: 'Thesis health',
      description:
        "Evaluates one of the caller's saved theses (created with POST /api/v1/thesis) against current data: health score 0..100, status (healthy, weakening, at_risk, invalidated), triggered conditions and whether action is required. Needs an API key; only the thesis owner may call it. Same data as GET /api/v1/thesis/{id}/health.",
      inputSchema: INPUT.get_thesis_health,
      outputSchema: ThesisHealthSchema,
      annotations: READ_ONLY,
    },
    async ({ thesis_id }) => {
      const c = ctx.caller;
      return run(ctx, 'get_thesis_health', { needsKey: true }, () => theses.health(c.kind === 'anonymous' ? '' : c.userId, thesis_id), summary.thesis);
    },
  );

  server.registerTool(
    'get_assets',
    {
      title: 'Supported assets',
      description:
        'The supported assets (CoinGecko ids and tickers) with their current signal, price, chain and capability flags (signals, factors, signal_history, chain_health, chain_metrics, funding_rate, thesis). Call this to find valid asset ids. Same data as GET /api/v1/assets.',
      inputSchema: INPUT.none,
      outputSchema: AssetsDataSchema,
      annotations: READ_ONLY,
    },
    async () => run(ctx, 'get_assets', {}, () => market.assets().value, summary.assets),
  );

  server.registerTool(
    'get_signal_history',
    {
      title: 'Signal history',
      description:
        'Past changes of an asset\'s signal, newest first, each with the factor snapshot computed point-in-time from the data of that day. Needs a Pro or API tier key. Same data as GET /api/v1/signal-history/{asset}.',
      inputSchema: INPUT.get_signal_history,
      outputSchema: HistoryDataSchema,
      annotations: READ_ONLY,
    },
    async ({ asset, days, limit }) => run(ctx, 'get_signal_history', { needsKey: true, tiers: HISTORY_TIERS }, async () => (await market.signalHistory(asset, days, limit)).value, summary.history),
  );

  return server;
}
