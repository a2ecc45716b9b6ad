// Options of one simulated engine, shared by the CLI (`ear sim`) and the programmatic startSim().
// Flags named after `vllm serve` mean what they mean there; null means "the profile's value".
import type { KvEventsConfig } from './kv-events-config.js';
import { parseStoreUrl } from './offload-store-client.js';
import { DEFAULT_PROFILE } from '../engine-model/profile.js';
import { SCHEDULING_POLICIES, type SchedulingPolicy } from './engine.js';

/** A LoRA adapter the engine serves (vLLM --lora-modules); requests name it as their model. */
export interface LoraModule {
  name: string;
  path: string;
  baseModelName: string | null;
}

export interface SimOptions {
  /** The model path vLLM would load; shown as ModelCard.root and the default served name. */
  model: string | null;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Names the model answers to; the first is the one reported. Default: [model ?? profile's model name]. */
  servedModelName: string[] | null;
  loraModules: LoraModule[];
  blockSize: number | null;
  numGpuBlocksOverride: number | null;
  maxNumSeqs: number | null;
  maxNumBatchedTokens: number | null;
  maxModelLen: number | null;
  /** vLLM --scheduling-policy: fcfs (its default) or priority (the body's `priority`, lower first). */
  schedulingPolicy: SchedulingPolicy;
  /** vLLM --long-prefill-token-threshold: most tokens a request computes per step; 0 = no cap (vLLM's default). */
  longPrefillTokenThreshold: number;
  kvEventsConfig: KvEventsConfig | null;
  enablePromptTokensDetails: boolean;
  enableForceIncludeUsage: boolean;
  /** Hardware/model profile, src/engine-model/profiles/NAME.json. */
  profile: string;
  /** Wall seconds per modelled second: 1 = real time, 0.1 = ten times faster, 0 = as fast as possible. */
  timeScale: number;
  tokenizer: string;
  seed: number;
  /** Seed of vLLM's NONE_HASH, as the string PYTHONHASHSEED holds; null: $PYTHONHASHSEED, else "0". */
  hashSeed: string | null;
  /** Chance per generated word that the engine emits EOS instead (once min_tokens are out); 0 = run to max_tokens. */
  stopProbability: number;
  /** Inner event layout on the KV-event wire (the outer batch is an array, as in every vLLM release). */
  kvEventFormat: 'array' | 'map';
  kvHashFormat: 'int' | 'bytes';
  /** Host importers use to reach this engine's KV side channel (vLLM: VLLM_NIXL_SIDE_CHANNEL_HOST). */
  kvTransferHost: string | null;
  /** Modelled seconds an exported request's blocks stay held without a pull (vLLM: VLLM_NIXL_ABORT_REQUEST_TIMEOUT). */
  kvHoldTimeout: number;
  /** No KV connector (vLLM without --kv-transfer-config): kv_transfer_params are ignored, none returned. */
  noKvTransfer: boolean;
  /** Host a shared offload store (LMCache remote backend / Mooncake store stand-in) and use it; others reach it over HTTP. */
  kvOffloadServe: boolean;
  /** Use the shared offload store another sim hosts at this URL (http://host:port). */
  kvOffloadStore: string | null;
  /** Capacity of a hosted store, in blocks (LRU beyond it). */
  kvOffloadCapacity: number;
  /** Engine index for the `engine` metrics label and the events' data_parallel_rank. */
  engineIndex: number;
  /** Largest request body accepted, bytes. */
  maxBodyBytes: number;
}

export const defaultSimOptions: Readonly<SimOptions> = Object.freeze({
  model: null,
  host: '0.0.0.0',
  port: 8000,
  servedModelName: null,
  loraModules: [],
  blockSize: null,
  numGpuBlocksOverride: null,
  maxNumSeqs: null,
  maxNumBatchedTokens: null,
  maxModelLen: null,
  schedulingPolicy: 'fcfs',
  longPrefillTokenThreshold: 0,
  kvEventsConfig: null,
  enablePromptTokensDetails: false,
  enableForceIncludeUsage: false,
  profile: DEFAULT_PROFILE,
  timeScale: 1,
  tokenizer: 'character',
  seed: 0,
  hashSeed: null,
  stopProbability: 0.02,
  kvEventFormat: 'array',
  kvHashFormat: 'int',
  kvTransferHost: null,
  noKvTransfer: false,
  kvHoldTimeout: 480,
  kvOffloadServe: false,
  kvOffloadStore: null,
  // 4M tokens: 512 GiB of Llama-3.1-8B KV, a few hosts' worth of CPU memory in a Mooncake store.
  kvOffloadCapacity: 262144,
  engineIndex: 0,
  maxBodyBytes: 64 * 1024 * 1024
});

const posInt = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;

/** Fills defaults and checks every field once; throws a RangeError naming the option and the rule. */
export function resolveSimOptions (partial: Partial<SimOptions>): Readonly<SimOptions> {
  const o: SimOptions = { ...defaultSimOptions, ...partial };
  const bad = (name: string, rule: string): never => { throw new RangeError(`option ${name}: ${rule}, got ${JSON.stringify((o as unknown as Record<string, unknown>)[name])}`); };
  if (typeof o.host !== 'string' || o.host === '') bad('host', 'must be a host name or address');
  if (!Number.isSafeInteger(o.port) || o.port < 0 || o.port > 65535) bad('port', 'must be an integer in 0..65535');
  if (o.servedModelName !== null && (!Array.isArray(o.servedModelName) || o.servedModelName.length === 0 ||
    !o.servedModelName.every((s) => typeof s === 'string' && s !== ''))) bad('servedModelName', 'must be a non-empty list of names');
  if (!Array.isArray(o.loraModules) || !o.loraModules.every((m) => typeof m?.name === 'string' && m.name !== '' && typeof m.path === 'string' &&
    (m.baseModelName === null || typeof m.baseModelName === 'string'))) bad('loraModules', 'must be a list of {name, path, baseModelName}');
  if (new Set(o.loraModules.map((m) => m.name)).size !== o.loraModules.length) bad('loraModules', 'names must be unique');
  for (const k of ['blockSize', 'numGpuBlocksOverride', 'maxNumSeqs', 'maxNumBatchedTokens', 'maxModelLen'] as const) {
    if (o[k] !== null && !posInt(o[k])) bad(k, 'must be a positive integer');
  }
  if (!SCHEDULING_POLICIES.includes(o.schedulingPolicy)) bad('schedulingPolicy', `must be one of ${SCHEDULING_POLICIES.join(', ')}`);
  if (!Number.isSafeInteger(o.longPrefillTokenThreshold) || o.longPrefillTokenThreshold < 0) bad('longPrefillTokenThreshold', 'must be an integer >= 0');
  if (typeof o.timeScale !== 'number' || !Number.isFinite(o.timeScale) || o.timeScale < 0) bad('timeScale', 'must be a number >= 0');
  if (!Number.isSafeInteger(o.seed)) bad('seed', 'must be an integer');
  if (o.hashSeed !== null && typeof o.hashSeed !== 'string') bad('hashSeed', 'must be a string or null');
  if (typeof o.stopProbability !== 'number' || !(o.stopProbability >= 0 && o.stopProbability <= 1)) bad('stopProbability', 'must be a number in [0, 1]');
  if (o.kvEventFormat !== 'array' && o.kvEventFormat !== 'map') bad('kvEventFormat', 'must be "array" or "map"');
  if (o.kvHashFormat !== 'int' && o.kvHashFormat !== 'bytes') bad('kvHashFormat', 'must be "int" or "bytes"');
  if (typeof o.kvHoldTimeout !== 'number' || !(o.kvHoldTimeout > 0)) bad('kvHoldTimeout', 'must be a number of seconds > 0');
  if (typeof o.kvOffloadServe !== 'boolean') bad('kvOffloadServe', 'must be true or false');
  if (o.kvOffloadStore !== null) {
    if (typeof o.kvOffloadStore !== 'string') bad('kvOffloadStore', 'must be an http://host:port URL or null');
    try { o.kvOffloadStore = parseStoreUrl(o.kvOffloadStore); } catch { bad('kvOffloadStore', 'must be an http://host:port URL with no path'); }
    if (o.kvOffloadServe) bad('kvOffloadStore', 'cannot be combined with kvOffloadServe (a sim either hosts the store or uses another\'s)');
  }
  if (!posInt(o.kvOffloadCapacity) || o.kvOffloadCapacity > 2 ** 24) bad('kvOffloadCapacity', `must be an integer of blocks in 1..${2 ** 24}`);
  if (!Number.isSafeInteger(o.engineIndex) || o.engineIndex < 0) bad('engineIndex', 'must be an integer >= 0');
  if (!posInt(o.maxBodyBytes)) bad('maxBodyBytes', 'must be a positive integer');
  if (o.servedModelName !== null) Object.freeze(o.servedModelName);
  return Object.freeze(o);
}
