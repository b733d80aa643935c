import type { z } from 'zod';
import type { ErrorCode } from '../errors.ts';
import type { Caller, Policy } from './access.ts';
import type { KeyService } from './keys.ts';
import type { MarketService } from './market.ts';
import type { Served } from './served.ts';
import type { ThesisService } from './theses.ts';

export { fresh, type Served } from './served.ts';

/** The services an operation runs on (the core provides them; see src/core.ts). */
export interface Services {
  market: MarketService;
  keys: KeyService;
  theses: ThesisService;
}

/**
 * One public question of the service, whatever surface asks it (docs/architecture.md,
 * "Operations"): its name (the OpenAPI operationId), who may ask it (one access policy,
 * enforced by services/access.ts for REST and MCP alike), its typed input and output, and
 * `run`. A REST route is path + parsing + OpenAPI around an operation; an MCP tool is title +
 * description + text summary around one.
 */
export interface Operation<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  /** camelCase operationId, e.g. `listSignals`. */
  readonly name: string;
  /** One line for the OpenAPI summary. */
  readonly summary: string;
  /** What it answers and how (OpenAPI description). */
  readonly description?: string;
  /** OpenAPI tag: signals, regime, chains, assets, status, keys, theses. */
  readonly tag: 'signals' | 'regime' | 'chains' | 'assets' | 'status' | 'keys' | 'theses';
  /** Who may call it. */
  readonly policy: Policy;
  /** The input after parsing (REST maps path, query and body to it; MCP tool arguments are it or map to it). */
  readonly input: I;
  /** The `data` it answers with (REST response envelope, MCP structuredContent). */
  readonly output: O;
  /**
   * Errors `run` itself may raise besides the ones every operation can answer (invalid input,
   * the policy's 401/403/429, 500, 503): e.g. NOT_FOUND, KEY_LIMIT_REACHED.
   */
  readonly errors?: readonly ErrorCode[];
  /** HTTP status of a success (201 for creations). */
  readonly status?: 200 | 201;
  /**
   * Answers the question for an authorized caller.
   * @throws ServiceError with a code from the closed set (src/errors.ts).
   */
  run(services: Services, caller: Caller, input: z.output<I>): Served<z.output<O>> | Promise<Served<z.output<O>>>;
}

/** Declares an operation (identity function that keeps the input and output types). */
export function defineOperation<I extends z.ZodType, O extends z.ZodType>(op: Operation<I, O>): Operation<I, O> {
  return op;
}
