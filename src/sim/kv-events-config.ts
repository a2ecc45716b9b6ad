// `--kv-events-config '<JSON>'` with vLLM's keys and defaults (vllm-wire.md §1.7).

export interface KvEventsConfig {
  enableKvCacheEvents: boolean;
  /** 'zmq' or 'null'; vLLM's default (None) becomes 'zmq' when enabled, else 'null'. */
  publisher: 'zmq' | 'null';
  endpoint: string;
  replayEndpoint: string | null;
  bufferSteps: number;
  hwm: number;
  maxQueueSize: number;
  topic: string;
}

export const defaultKvEventsConfig: Readonly<KvEventsConfig> = Object.freeze({
  enableKvCacheEvents: false,
  publisher: 'null',
  endpoint: 'tcp://*:5557',
  replayEndpoint: null,
  bufferSteps: 10_000,
  hwm: 100_000,
  maxQueueSize: 100_000,
  topic: ''
});

const keys = ['enable_kv_cache_events', 'publisher', 'endpoint', 'replay_endpoint', 'buffer_steps', 'hwm', 'max_queue_size', 'topic'];

function fail (msg: string): never {
  throw new Error(`--kv-events-config: ${msg}`);
}

function positiveInt (o: Record<string, unknown>, key: string, dflt: number): number {
  const v = o[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) fail(`"${key}" must be a positive integer, got ${JSON.stringify(v)}`);
  return v;
}

function str (o: Record<string, unknown>, key: string, dflt: string): string {
  const v = o[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'string') fail(`"${key}" must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/** Accepts the JSON text of the flag (or an already parsed object); absent means vLLM's defaults (events off). */
export function parseKvEventsConfig (input: string | Record<string, unknown> | undefined | null): KvEventsConfig {
  if (input === undefined || input === null) return { ...defaultKvEventsConfig };
  let o: unknown = input;
  if (typeof input === 'string') {
    try { o = JSON.parse(input); } catch (err) { fail(`not valid JSON (${(err as Error).message})`); }
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) fail('must be a JSON object');
  const obj = o as Record<string, unknown>;
  for (const k of Object.keys(obj)) if (!keys.includes(k)) fail(`unknown key "${k}" (known: ${keys.join(', ')})`);
  const enable = obj.enable_kv_cache_events ?? false;
  if (typeof enable !== 'boolean') fail('"enable_kv_cache_events" must be a boolean');
  const publisher = obj.publisher ?? null;
  if (publisher !== null && publisher !== 'zmq' && publisher !== 'null') fail(`"publisher" must be "zmq" or "null", got ${JSON.stringify(publisher)}`);
  const replay = obj.replay_endpoint ?? null;
  if (replay !== null && typeof replay !== 'string') fail('"replay_endpoint" must be a string or null');
  const endpoint = str(obj, 'endpoint', defaultKvEventsConfig.endpoint);
  if (!/^(tcp|ipc|inproc):\/\/./.test(endpoint)) fail(`"endpoint" must be a tcp://, ipc:// or inproc:// address, got "${endpoint}"`);
  return {
    enableKvCacheEvents: enable,
    publisher: (publisher ?? (enable ? 'zmq' : 'null')) as 'zmq' | 'null',
    endpoint,
    replayEndpoint: replay as string | null,
    bufferSteps: positiveInt(obj, 'buffer_steps', defaultKvEventsConfig.bufferSteps),
    hwm: positiveInt(obj, 'hwm', defaultKvEventsConfig.hwm),
    maxQueueSize: positiveInt(obj, 'max_queue_size', defaultKvEventsConfig.maxQueueSize),
    topic: str(obj, 'topic', '')
  };
}

/** Events flow only when switched on and the publisher is zmq. */
export const kvEventsActive = (c: KvEventsConfig): boolean => c.enableKvCacheEvents && c.publisher === 'zmq';

/** vLLM's rule: bind if the endpoint has `*` or `::` or is ipc/inproc ("bind stable, connect volatile"); else connect. */
export const shouldBind = (endpoint: string): boolean =>
  endpoint.includes('*') || endpoint.includes('::') || endpoint.startsWith('ipc://') || endpoint.startsWith('inproc://');
