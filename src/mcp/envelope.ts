// The JSON-RPC 2.0 envelope checks shared by MCP over HTTP (http.ts) and stdio (stdio.ts),
// in a module of their own so that stdio does not load the HTTP side.

/**
 * What makes `m` not a JSON-RPC 2.0 message (request, notification or response), or null when
 * it is one as far as its envelope goes (the SDK checks the rest). JSON-RPC 2.0 answers such a
 * message -32600 Invalid Request; the SDK's transport answered -32700 Parse error, which says
 * the JSON itself was unreadable.
 */
export function invalidEnvelope(m: unknown): string | null {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return 'a message must be a JSON object';
  const o = m as Record<string, unknown>;
  if (o.jsonrpc !== '2.0') return `"jsonrpc" must be "2.0"`;
  if ('id' in o && !validId(o.id)) return '"id" must be a string or an integer (MCP request ids)';
  if ('method' in o) {
    if (typeof o.method !== 'string') return '"method" must be a string';
    // JSON-RPC 2.0 allows an array too; MCP's requests and notifications take named params only.
    if ('params' in o && (typeof o.params !== 'object' || o.params === null || Array.isArray(o.params)))
      return '"params" must be an object (MCP takes named params), or left out';
    return extraMember(o, REQUEST_MEMBERS);
  }
  if (!('id' in o) || !('result' in o || 'error' in o))
    return 'a message needs a "method" (a request or notification), or an "id" with a "result" or "error" (a response)';
  if ('result' in o && 'error' in o) return 'a response has a "result" or an "error", not both';
  return extraMember(o, 'result' in o ? RESULT_MEMBERS : ERROR_MEMBERS);
}

/** The members of each kind of message (MCP's JSON-RPC schemas are strict: no other member). */
const REQUEST_MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params']);
const RESULT_MEMBERS = new Set(['jsonrpc', 'id', 'result']);
const ERROR_MEMBERS = new Set(['jsonrpc', 'id', 'error']);

/** The first member of `o` not in `allowed`, as the reason the message is refused, or null. */
function extraMember(o: Record<string, unknown>, allowed: ReadonlySet<string>): string | null {
  const extra = Object.keys(o).find((k) => !allowed.has(k));
  return extra === undefined
    ? null
    : `unknown member ${JSON.stringify(extra)} (a message holds only ${[...allowed].map((k) => `"${k}"`).join(', ')}; put request data in "params")`;
}

/** An MCP request id: a string or a safe integer (the SDK's RequestIdSchema). */
function validId(id: unknown): id is string | number {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
}

/**
 * The first id used by more than one request of a batch, or null. Each request of a batch is
 * answered by its id, so two with one id cannot both be answered (and both tools/calls would
 * count against the quota for one answer).
 */
export function repeatedId(messages: readonly unknown[]): string | number | null {
  const seen = new Set<string>();
  for (const m of messages) {
    const o = m as { id?: unknown; method?: unknown };
    if (typeof o.method !== 'string' || (typeof o.id !== 'string' && typeof o.id !== 'number')) continue;
    const k = `${typeof o.id}:${o.id}`;
    if (seen.has(k)) return o.id;
    seen.add(k);
  }
  return null;
}

/** The id of a message, when it has a usable one (a string or a safe integer; for the error answering it). */
export function messageId(m: unknown): string | number | null {
  const id = typeof m === 'object' && m !== null ? (m as { id?: unknown }).id : undefined;
  return validId(id) ? id : null;
}
