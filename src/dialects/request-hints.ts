// The hints agents and routers put in a body (docs/api.md#agent-hints), read and bounded at the door:
//   `vllm_xargs.agentic_context` (vLLM router RFC #285 / PR #286: an object, or that object as a JSON string):
//     program_id (else task_id:agent_id, agent_id "lead" by default), task_id, session_id, agent_id,
//     parent_program_id (alias parent_id), root_program_id (root_id), blocks_parent (needs a parent),
//     priority (an integer, larger first), deadline_seconds (deadline), expected_output_length
//     (expected_output_tokens), kv_retention_ttl_seconds (kv_retention_ttl). Ids are strings or integers.
//   Anthropic `cache_control` marks (`{"type":"ephemeral","ttl":"5m"|"1h"}`, ttl 5m when absent) on system
//     blocks, message content blocks (and a tool_result's own blocks) and tools: the longest TTL asked for is the
//     prefix's retention, as Dynamo maps it onto an engine's retention TTL.
// Every number is bounded; a value past its bound or of the wrong type is the client's mistake (a 400 in the
// API's shape). Pure: the clamp to the gateway's maximum retention happens on the main thread (request/hints.ts).
import { bad, isObject, shown, MAX_TOKEN_COUNT, type Doc } from './chat-request.js';

/** Where a retention TTL came from; `tool-gap` is the routing core's own (a turn that ended in a tool call). */
export type RetentionSource = 'cache_control' | 'agentic_context' | 'tool-gap';

export interface RequestHints {
  /** The program (session) the request is a step of; null when the context names none. */
  programId: string | null;
  taskId: string | null;
  parentProgramId: string | null;
  rootProgramId: string | null;
  /** The parent waits on this program (a blocking sub-agent). */
  blocksParent: boolean;
  /** vLLM router's priority: larger is served first; 0 when absent. */
  priority: number;
  /** Seconds from arrival by which the program wants this step served; null: none. */
  deadlineSeconds: number | null;
  /** Output tokens the client expects this step to produce; null: unknown. */
  expectedOutputTokens: number | null;
  /** How long the client wants the prompt's prefix kept after this turn (ms, unclamped); null: no hint. */
  retentionTtlMs: number | null;
  retentionSource: RetentionSource | null;
}

/** Bounds of the hints (a value past one is refused with a 400). */
export const HINT_LIMITS = Object.freeze({
  /** Bytes of an id (the router's MAX_IDENTITY_COMPONENT_BYTES). */
  idBytes: 256,
  /** Bytes of an agentic_context sent as a JSON string (the router's MAX_AGENTIC_CONTEXT_BYTES). */
  contextBytes: 16 * 1024,
  /** |priority|. */
  priority: 2 ** 31 - 1,
  /** deadline_seconds and kv_retention_ttl_seconds: a day. */
  seconds: 86_400
});

/** cache_control TTLs Anthropic's API takes, in ms. */
const CACHE_TTLS: Readonly<Record<string, number>> = { '5m': 300_000, '1h': 3_600_000 };
const DEFAULT_CACHE_TTL_MS = CACHE_TTLS['5m'];

const absent = (v: unknown): v is null | undefined => v === undefined || v === null;

/** The first of `keys` present (not null) in `c`, with the key that named it. */
function first (c: Doc, keys: readonly string[]): [string, unknown] | null {
  for (const k of keys) if (!absent(c[k])) return [k, c[k]];
  return null;
}

function idOf (c: Doc, keys: readonly string[]): string | null {
  const f = first(c, keys);
  if (f === null) return null;
  const [k, v] = f;
  let s: string;
  if (typeof v === 'string') s = v.trim();
  else if (typeof v === 'number' && Number.isSafeInteger(v)) s = String(v);
  else throw bad(`"vllm_xargs.agentic_context.${k}" must be a string or an integer id, got ${shown(v)}`);
  if (s === '') throw bad(`"vllm_xargs.agentic_context.${k}" must not be empty`);
  if (Buffer.byteLength(s) > HINT_LIMITS.idBytes) throw bad(`"vllm_xargs.agentic_context.${k}" must be at most ${HINT_LIMITS.idBytes} bytes`);
  return s;
}

function numberIn (c: Doc, keys: readonly string[], min: number, max: number, integer: boolean): number | null {
  const f = first(c, keys);
  if (f === null) return null;
  const [k, v] = f;
  if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isSafeInteger(v)) || v < min || v > max) {
    throw bad(`"vllm_xargs.agentic_context.${k}" must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got ${shown(v)}`);
  }
  return v;
}

function boolOf (c: Doc, keys: readonly string[]): boolean | null {
  const f = first(c, keys);
  if (f === null) return null;
  if (typeof f[1] !== 'boolean') throw bad(`"vllm_xargs.agentic_context.${f[0]}" must be a boolean, got ${shown(f[1])}`);
  return f[1];
}

/** The agentic_context object of a body, or null when it has none (vllm_xargs or the context absent or null). */
function agenticContextOf (b: Doc): Doc | null {
  const x = b.vllm_xargs;
  if (absent(x)) return null;
  if (!isObject(x)) throw bad(`"vllm_xargs" must be an object, got ${shown(x)}`);
  const raw = x.agentic_context;
  if (absent(raw)) return null;
  let c: unknown = raw;
  if (typeof raw === 'string') {
    if (Buffer.byteLength(raw) > HINT_LIMITS.contextBytes) throw bad(`"vllm_xargs.agentic_context" must be at most ${HINT_LIMITS.contextBytes} bytes`);
    try {
      c = JSON.parse(raw);
    } catch {
      throw bad('"vllm_xargs.agentic_context" as a string must hold a JSON object');
    }
  }
  if (!isObject(c)) throw bad(`"vllm_xargs.agentic_context" must be an object, got ${shown(c)}`);
  return c;
}

/** The longest retention a body's cache_control marks ask for (ms), or null when it has none. */
export function cacheControlTtlMs (b: Doc): number | null {
  let best: number | null = null;
  const mark = (v: Doc, where: string): void => {
    const cc = v.cache_control;
    if (absent(cc)) return;
    if (!isObject(cc)) throw bad(`"${where}.cache_control" must be an object, got ${shown(cc)}`);
    if (cc.type !== 'ephemeral') throw bad(`"${where}.cache_control.type" must be "ephemeral", got ${shown(cc.type)}`);
    let ms = DEFAULT_CACHE_TTL_MS;
    if (!absent(cc.ttl)) {
      if (typeof cc.ttl !== 'string' || !Object.hasOwn(CACHE_TTLS, cc.ttl)) throw bad(`"${where}.cache_control.ttl" must be "5m" or "1h", got ${shown(cc.ttl)}`);
      ms = CACHE_TTLS[cc.ttl];
    }
    if (best === null || ms > best) best = ms;
  };
  const blocks = (list: unknown, where: string): void => {
    if (!Array.isArray(list)) return;
    for (const [i, blk] of list.entries()) {
      if (!isObject(blk)) continue;
      mark(blk, `${where}[${i}]`);
      if (blk.type === 'tool_result') blocks(blk.content, `${where}[${i}].content`);
    }
  };
  blocks(b.system, 'system');
  if (Array.isArray(b.messages)) for (const [i, m] of b.messages.entries()) if (isObject(m)) blocks(m.content, `messages[${i}].content`);
  blocks(b.tools, 'tools');
  return best;
}

/**
 * The hints of a parsed body (`cacheControl`: the API is Anthropic's, whose marks are read), or null when it
 * carries none. Throws a 400 EarError for a hint of the wrong type or past its bound.
 */
export function requestHints (b: Doc, cacheControl: boolean): RequestHints | null {
  const c = agenticContextOf(b);
  const marked = cacheControl ? cacheControlTtlMs(b) : null;
  if (c === null && marked === null) return null;
  let h: RequestHints = {
    programId: null, taskId: null, parentProgramId: null, rootProgramId: null, blocksParent: false, priority: 0,
    deadlineSeconds: null, expectedOutputTokens: null, retentionTtlMs: null, retentionSource: null
  };
  if (c !== null) h = fromContext(c);
  // The engine-facing hint wins over the Anthropic one: it names the retention outright.
  if (h.retentionTtlMs === null && marked !== null) {
    h.retentionTtlMs = marked;
    h.retentionSource = 'cache_control';
  }
  return h;
}

function fromContext (c: Doc): RequestHints {
  const taskId = idOf(c, ['task_id']) ?? idOf(c, ['session_id']);
  const agentId = idOf(c, ['agent_id']);
  const programId = idOf(c, ['program_id']) ?? (taskId === null ? null : `${taskId}:${agentId ?? 'lead'}`);
  const parentProgramId = idOf(c, ['parent_program_id', 'parent_id']);
  const blocksParent = boolOf(c, ['blocks_parent', 'blocking_parent']) ?? false;
  if (parentProgramId !== null && parentProgramId === programId) throw bad('"vllm_xargs.agentic_context.parent_program_id" must differ from program_id');
  if (blocksParent && parentProgramId === null) throw bad('"vllm_xargs.agentic_context.blocks_parent" requires parent_program_id');
  const ttlSeconds = numberIn(c, ['kv_retention_ttl_seconds', 'kv_retention_ttl'], 0, HINT_LIMITS.seconds, false);
  return {
    programId,
    taskId,
    parentProgramId,
    rootProgramId: idOf(c, ['root_program_id', 'root_id']),
    blocksParent,
    priority: numberIn(c, ['priority'], -HINT_LIMITS.priority, HINT_LIMITS.priority, true) ?? 0,
    deadlineSeconds: numberIn(c, ['deadline_seconds', 'deadline'], 0, HINT_LIMITS.seconds, false),
    expectedOutputTokens: numberIn(c, ['expected_output_length', 'expected_output_tokens'], 0, MAX_TOKEN_COUNT, true),
    retentionTtlMs: ttlSeconds === null ? null : Math.round(ttlSeconds * 1000),
    retentionSource: ttlSeconds === null ? null : 'agentic_context'
  };
}

/** Whether a body's vllm_xargs holds an agentic_context (what EAR strips before an engine). */
export function hasAgenticContext (b: Doc): boolean {
  const x = b.vllm_xargs;
  return isObject(x) && 'agentic_context' in x;
}
