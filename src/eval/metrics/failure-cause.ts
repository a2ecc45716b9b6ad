// Why a request failed, as a short stable name for MetricsSummary.failures: both drivers name the same failure
// the same way (the engine's error in `des`, its HTTP answer in `e2e`), and never by a JS class such as RangeError.

/** Engine error codes (src/sim/engine.ts) and the causes they count as. */
const CAUSE_BY_CODE: Readonly<Record<string, string>> = {
  EAR_ERR_CONTEXT_LENGTH: 'context_length_exceeded',
  EAR_ERR_KV_CAPACITY: 'kv_capacity_exceeded',
  EAR_ERR_ENGINE_QUEUE_FULL: 'engine_queue_full',
};

/** vLLM's 400 messages for a prompt (with max_tokens) over max_model_len (vllm serving_engine input checks). */
const CONTEXT_LENGTH = /maximum context length is \d+ tokens|'max_tokens' or 'max_completion_tokens' is too large/;

/** A non-2xx answer (or an error event in the stream) from the gateway or an engine: its status and body. */
export class HttpStatusError extends Error {
  readonly status: number;
  readonly body: string;
  constructor (status: number, body: string) {
    super(`status ${status}: ${body.slice(0, 200)}`);
    this.name = 'HttpStatusError';
    this.status = status;
    this.body = body;
  }
}

/** The cause `err` counts as; `fallback` (default: the error's name) when it is none of the known ones. */
export function failureCause (err: unknown, fallback?: string): string {
  if (err instanceof HttpStatusError) {
    if (err.status === 400 && CONTEXT_LENGTH.test(errorMessage(err.body))) return 'context_length_exceeded';
    return `status ${err.status}`;
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code in CAUSE_BY_CODE) return CAUSE_BY_CODE[code];
  return fallback ?? ((err as Error | null)?.name || 'error');
}

/** The message of an OpenAI/vLLM error body (`{"error":{"message":..}}`, or the older flat form); else the body. */
function errorMessage (body: string): string {
  try {
    const doc = JSON.parse(body) as { error?: { message?: unknown }; message?: unknown };
    const m = doc?.error?.message ?? doc?.message;
    return typeof m === 'string' ? m : body;
  } catch { return body; }
}
