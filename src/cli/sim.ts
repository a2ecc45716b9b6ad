// `ear sim [model] [options]`: one simulated vLLM engine. Flags shared with `vllm serve` keep their meaning;
// the rest are the simulator's own. Runs until SIGINT/SIGTERM.
import { pino } from 'pino';
import { parseKvEventsConfig } from '../sim/kv-events-config.js';
import { parseStoreUrl } from '../sim/offload-store-client.js';
import { startSim } from '../sim/server.js';
import type { LoraModule, SimOptions } from '../sim/sim-options.js';
import { defaultSimOptions } from '../sim/sim-options.js';

type Kind = 'string' | 'int' | 'number' | 'bool' | 'list';

interface Flag {
  key: keyof SimOptions | 'enableLora';
  kind: Kind;
  help: string;
  choices?: string[];
}

const vllmFlags: Record<string, Flag> = {
  host: { key: 'host', kind: 'string', help: 'address to listen on (default 0.0.0.0)' },
  port: { key: 'port', kind: 'int', help: 'port to listen on, 0 = any free port (default 8000)' },
  'served-model-name': { key: 'servedModelName', kind: 'list', help: 'model name(s) the API answers to; the first is reported' },
  'lora-modules': { key: 'loraModules', kind: 'list', help: 'LoRA adapters as name=path or JSON {"name","path","base_model_name"}' },
  'enable-lora': { key: 'enableLora', kind: 'bool', help: 'accepted for compatibility: adapters are always enabled' },
  'block-size': { key: 'blockSize', kind: 'int', help: 'tokens per KV block (default: the profile\'s, 16)' },
  'num-gpu-blocks-override': { key: 'numGpuBlocksOverride', kind: 'int', help: 'KV cache size in blocks instead of the profile\'s memory budget' },
  'max-num-seqs': { key: 'maxNumSeqs', kind: 'int', help: 'most requests running in one step' },
  'max-num-batched-tokens': { key: 'maxNumBatchedTokens', kind: 'int', help: 'token budget of one step (chunked prefill)' },
  'max-model-len': { key: 'maxModelLen', kind: 'int', help: 'context length (prompt + output)' },
  'scheduling-policy': { key: 'schedulingPolicy', kind: 'string', choices: ['fcfs', 'priority'], help: 'fcfs (default), or priority: waiting requests by the body\'s `priority` (lower first), then arrival' },
  'long-prefill-token-threshold': { key: 'longPrefillTokenThreshold', kind: 'int', help: 'most tokens one request computes per step (0, the default: no cap)' },
  'kv-events-config': { key: 'kvEventsConfig', kind: 'string', help: 'JSON: enable_kv_cache_events, publisher, endpoint, replay_endpoint, buffer_steps, hwm, max_queue_size, topic' },
  'enable-prompt-tokens-details': { key: 'enablePromptTokensDetails', kind: 'bool', help: 'report usage.prompt_tokens_details.cached_tokens' },
  'enable-force-include-usage': { key: 'enableForceIncludeUsage', kind: 'bool', help: 'send the usage chunk on every stream' },
  seed: { key: 'seed', kind: 'int', help: 'seed of generated tokens for requests without one (default 0)' }
};

const ownFlags: Record<string, Flag> = {
  profile: { key: 'profile', kind: 'string', help: `hardware/model profile from src/engine-model/profiles (default ${defaultSimOptions.profile})` },
  'time-scale': { key: 'timeScale', kind: 'number', help: 'wall seconds per modelled second: 1 real time, 0.1 ten times faster, 0 no waiting (default 1)' },
  tokenizer: { key: 'tokenizer', kind: 'string', help: 'character | tiktoken:o200k_base | tiktoken:cl100k_base | hf:qwen3 | hf:<path> (default character)' },
  'kv-event-format': { key: 'kvEventFormat', kind: 'string', choices: ['array', 'map'], help: 'inner KV event layout: tagged arrays (vLLM before #42892) or maps (default array)' },
  'kv-hash-format': { key: 'kvHashFormat', kind: 'string', choices: ['int', 'bytes'], help: 'block hashes as uint64 ints (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1) or 32-byte bin (default int)' },
  'stop-probability': { key: 'stopProbability', kind: 'number', help: 'chance per generated word of ending with EOS (default 0.02; 0 = always run to max_tokens)' },
  'kv-transfer-host': { key: 'kvTransferHost', kind: 'string', help: 'remote_host put in exported kv_transfer_params (default: --host, or 127.0.0.1 for a wildcard)' },
  'no-kv-transfer': { key: 'noKvTransfer', kind: 'bool', help: 'as vLLM started without --kv-transfer-config: kv_transfer_params are ignored and none are returned' },
  'kv-hold-timeout': { key: 'kvHoldTimeout', kind: 'number', help: 'modelled seconds exported blocks stay held without a pull (default 480)' },
  'kv-offload-serve': { key: 'kvOffloadServe', kind: 'bool', help: 'host a shared KV offload store (LMCache remote backend / Mooncake store) at /ear/v1/kv/store/*, and use it' },
  'kv-offload-store': { key: 'kvOffloadStore', kind: 'string', help: 'use the shared offload store a --kv-offload-serve sim hosts: http://host:port' },
  'kv-offload-capacity': { key: 'kvOffloadCapacity', kind: 'int', help: `blocks the hosted store keeps, least recently used evicted first (default ${defaultSimOptions.kvOffloadCapacity})` },
  'engine-index': { key: 'engineIndex', kind: 'int', help: 'the `engine` metrics label and events\' data_parallel_rank (default 0)' }
};

const flags: Record<string, Flag> = { ...vllmFlags, ...ownFlags };

export function simUsage (): string {
  const line = (name: string, f: Flag): string => `  --${name}${f.kind === 'bool' ? '' : f.kind === 'list' ? ' NAME...' : ' VALUE'}`.padEnd(40) + f.help;
  return ['usage: ear sim [MODEL] [options]', '',
    'A simulated engine that speaks vLLM\'s protocols: /v1/chat/completions, /v1/completions, /tokenize, /detokenize,',
    '/v1/models, /health, /metrics, /reset_prefix_cache, KV events over ZMQ, kv_transfer_params export/import.', '',
    'A shared offload store: one sim runs --kv-offload-serve, the others --kv-offload-store http://HOST:PORT. Every engine',
    'saves the blocks it computes there, and a request loads the stored prefix beyond its local hits (timed by the',
    'profile\'s offload.loadBytesPerSecond) instead of prefilling it; loaded tokens count in cached_tokens. All sims',
    'need the same --block-size, model and PYTHONHASHSEED, or lookups silently miss (as with LMCache).', '',
    'vllm serve options (same meaning):', ...Object.entries(vllmFlags).map(([n, f]) => line(n, f)), '',
    'simulator options:', ...Object.entries(ownFlags).map(([n, f]) => line(n, f)), '',
    '  --help'.padEnd(40) + 'this text'].join('\n');
}

export class UsageError extends Error {}

/** vLLM's two forms: name=path, or JSON {"name","path","base_model_name"}. */
function parseLoraModule (v: string, flag: string): LoraModule {
  if (v.trim().startsWith('{')) {
    let o: Record<string, unknown>;
    try { o = JSON.parse(v) as Record<string, unknown>; } catch (err) { throw new UsageError(`--${flag}: invalid JSON ${JSON.stringify(v)} (${(err as Error).message})`); }
    if (typeof o?.name !== 'string' || o.name === '' || typeof o.path !== 'string') throw new UsageError(`--${flag}: JSON form needs string "name" and "path"`);
    if (o.base_model_name !== undefined && o.base_model_name !== null && typeof o.base_model_name !== 'string') throw new UsageError(`--${flag}: "base_model_name" must be a string`);
    return { name: o.name, path: o.path, baseModelName: (o.base_model_name ?? null) as string | null };
  }
  const eq = v.indexOf('=');
  if (eq <= 0 || eq === v.length - 1) throw new UsageError(`--${flag}: expected name=path, got ${JSON.stringify(v)}`);
  return { name: v.slice(0, eq), path: v.slice(eq + 1), baseModelName: null };
}

/** argv → options; throws UsageError with a message naming the flag. Accepts --flag value, --flag=value, --flag_name. */
export function parseSimArgs (argv: string[]): Partial<SimOptions> | 'help' {
  const out: Partial<SimOptions> = {};
  const set = out as Record<string, unknown>;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') return 'help';
    if (!arg.startsWith('--')) {
      if (out.model !== undefined) throw new UsageError(`unexpected argument "${arg}" (the model was already given as "${out.model}")`);
      out.model = arg;
      continue;
    }
    const eq = arg.indexOf('=');
    const name = (eq < 0 ? arg.slice(2) : arg.slice(2, eq)).replaceAll('_', '-');
    const flag = Object.hasOwn(flags, name) ? flags[name] : undefined;
    if (flag === undefined) throw new UsageError(`unknown option --${name}`);
    const inline = eq < 0 ? undefined : arg.slice(eq + 1);
    if (flag.kind === 'bool') {
      if (inline !== undefined && !['true', 'false'].includes(inline.toLowerCase())) throw new UsageError(`--${name} takes no value (or =true/=false)`);
      if (flag.key !== 'enableLora') set[flag.key] = inline === undefined || inline.toLowerCase() === 'true';
      continue;
    }
    if (flag.kind === 'list') {
      const values: string[] = inline !== undefined ? [inline] : [];
      while (inline === undefined && i + 1 < argv.length && !argv[i + 1].startsWith('--')) values.push(argv[++i]);
      if (values.length === 0 || values.some((v) => v === '')) throw new UsageError(`--${name} needs at least one name`);
      set[flag.key] = flag.key === 'loraModules' ? values.map((v) => parseLoraModule(v, name)) : values;
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    if (flag.choices !== undefined && !flag.choices.includes(value)) throw new UsageError(`--${name} must be one of ${flag.choices.join(', ')}, got "${value}"`);
    if (flag.kind === 'int') {
      if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name} must be an integer, got "${value}"`);
      set[flag.key] = Number(value);
    } else if (flag.kind === 'number') {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got "${value}"`);
      set[flag.key] = n;
    } else if (flag.key === 'kvEventsConfig') {
      try {
        out.kvEventsConfig = parseKvEventsConfig(value);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    } else if (flag.key === 'kvOffloadStore') {
      try {
        out.kvOffloadStore = parseStoreUrl(value);
      } catch (err) {
        throw new UsageError(`--${name}: ${(err as Error).message}`);
      }
    } else {
      set[flag.key] = value;
    }
  }
  return out;
}

export async function main (argv: string[]): Promise<number> {
  let parsed: Partial<SimOptions> | 'help';
  try {
    parsed = parseSimArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`ear sim: ${err.message}\nRun \`ear sim --help\` for the options.`);
    return 2;
  }
  if (parsed === 'help') {
    console.log(simUsage());
    return 0;
  }
  const log = pino({ level: process.env.EAR_LOG_LEVEL ?? 'info' });
  let sim;
  try {
    sim = await startSim({ ...parsed, logger: log });
  } catch (err) {
    console.error(`ear sim: ${(err as Error).message}`);
    return 1;
  }
  log.info({ url: sim.url, engineId: sim.engineId, kvEvents: sim.kvEventsEndpoint, kvReplay: sim.kvReplayEndpoint }, `ear sim listening on ${sim.url}`);
  await new Promise<void>((resolve) => {
    const stop = (): void => { resolve(); };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await sim.close();
  return 0;
}
