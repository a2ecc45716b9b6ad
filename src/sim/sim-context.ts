// What every HTTP handler of one simulated engine shares.
import type { Logger } from 'pino';
import type { Tokenizer } from '../tokenize/types.js';
import type { RemoteOffloadStore } from './offload-store-client.js';
import type { RealClockHost } from './real-clock-host.js';
import type { SimMetrics } from './sim-metrics.js';
import type { LoraModule, SimOptions } from './sim-options.js';

export interface SimContext {
  options: SimOptions;
  /** Served model names; the first is reported when a request names none. */
  modelNames: string[];
  loraModules: readonly LoraModule[];
  /** ModelCard.root: the model the engine "loaded". */
  root: string;
  maxModelLen: number;
  blockSize: number;
  tokenizer: Tokenizer;
  host: RealClockHost;
  metrics: SimMetrics;
  /** remote_engine_id of this engine in kv_transfer_params. */
  engineId: string;
  log: Logger;
  /** Where importers reach this engine's KV side channel (its own HTTP address). */
  sideChannel (): { host: string; port: number };
  /** The shared offload store another sim hosts (--kv-offload-store), asked before each request; else null. */
  offloadClient: RemoteOffloadStore | null;
  /** A process-unique number for engine request ids. */
  nextSeq (): number;
  /** In-process observers (the e2e evaluation driver): each finished request's modelled times and prompt usage, by its x-request-id. */
  onRequestFinished?: RequestFinishedHook;
}

/** Modelled seconds of one finished request: arrival, first scheduled, first token, finished. */
export interface RequestTimes { arrival: number; firstScheduled: number; firstToken: number; finished: number }
/** Its prompt as the engine ran it: tokens, and those its prefix cache served (what vLLM's usage reports as
 *  cached_tokens, which its Anthropic API does not carry). */
export interface RequestPromptUsage { promptTokens: number; cachedTokens: number }
export type RequestFinishedHook = (requestId: string | null, times: RequestTimes, prompt: RequestPromptUsage) => void;
