// /metrics with vLLM's v1 names, labels (model_name, engine) and buckets (vllm-wire.md §3.5). One registry per
// simulator so several engines can live in one process. Times are in modelled seconds (the engine's clock).
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineStats, FinishReason } from './engine-types.js';

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
const TOKEN_LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const REQUEST_LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];
const ITERATION_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

/** vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max. */
export function buckets125 (max: number): number[] {
  const out: number[] = [];
  for (let exp = 1; ; exp *= 10) {
    for (const m of [1, 2, 5]) {
      const v = m * exp;
      if (v > max) return out;
      out.push(v);
    }
  }
}

/** A finished request's timeline in modelled seconds. */
export interface RequestTimes {
  arrival: number;
  firstScheduled: number;
  firstToken: number;
  finished: number;
}

export interface FinishedRequest {
  times: RequestTimes;
  promptTokens: number;
  generationTokens: number;
  maxTokens: number;
  n: number;
  finishReason: FinishReason;
}

export interface CacheConfigInfo {
  blockSize: number;
  numGpuBlocks: number;
  numGpuBlocksOverride: number | null;
  gpuMemoryUtilization: number;
}

type Labels = 'model_name' | 'engine';

export class SimMetrics {
  readonly registry = new Registry();
  private readonly labels: Record<Labels, string>;
  private readonly counters: Record<'queries' | 'hits' | 'prompt' | 'generation' | 'preemptions', Counter<Labels>>;
  private readonly last = { queries: 0, hits: 0, prompt: 0, generation: 0, preemptions: 0 };
  private readonly success: Counter<Labels | 'finished_reason'>;
  private readonly h: Record<string, Histogram<Labels>>;

  /**
   * `startTimeSeconds`: when this engine started (epoch seconds), served as prometheus_client's
   * process_start_time_seconds; several engines in one process each report their own, as separate processes would.
   */
  constructor (modelName: string, engineIndex: number, maxModelLen: number, cache: CacheConfigInfo, stats: () => EngineStats, startTimeSeconds = Date.now() / 1000) {
    const registers = [this.registry];
    const labelNames: Labels[] = ['model_name', 'engine'];
    this.labels = { model_name: modelName, engine: String(engineIndex) };
    const labels = this.labels;
    const gauge = (name: string, help: string, read: (s: EngineStats) => number): void => {
      new Gauge({ name, help, labelNames, registers, collect () { this.set(labels, read(stats())); } });
    };
    gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', (s) => s.running);
    gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', (s) => s.waiting);
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', (s) => s.kvUsage);

    const counter = (name: string, help: string): Counter<Labels> => new Counter({ name, help, labelNames, registers });
    this.counters = {
      queries: counter('vllm:prefix_cache_queries_total', 'Prefix cache queries, in terms of number of queried tokens.'),
      hits: counter('vllm:prefix_cache_hits_total', 'Prefix cache hits, in terms of number of cached tokens.'),
      prompt: counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.'),
      generation: counter('vllm:generation_tokens_total', 'Number of generation tokens processed.'),
      preemptions: counter('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.')
    };
    for (const c of Object.values(this.counters)) c.inc(labels, 0);
    this.success = new Counter({
      name: 'vllm:request_success_total',
      help: 'Count of successfully processed requests.',
      labelNames: ['model_name', 'engine', 'finished_reason'],
      registers
    });
    for (const r of ['stop', 'length', 'abort']) this.success.inc({ ...labels, finished_reason: r }, 0);

    const hist = (name: string, help: string, buckets: number[]): Histogram<Labels> => new Histogram({ name, help, labelNames, buckets, registers });
    const tokenBuckets = buckets125(maxModelLen);
    this.h = {
      ttft: hist('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', TTFT_BUCKETS),
      itl: hist('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', TOKEN_LATENCY_BUCKETS),
      tpot: hist('vllm:request_time_per_output_token_seconds', 'Histogram of time_per_output_token_seconds per request.', TOKEN_LATENCY_BUCKETS),
      e2e: hist('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', REQUEST_LATENCY_BUCKETS),
      queue: hist('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.', REQUEST_LATENCY_BUCKETS),
      inference: hist('vllm:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.', REQUEST_LATENCY_BUCKETS),
      prefill: hist('vllm:request_prefill_time_seconds', 'Histogram of time spent in PREFILL phase for request.', REQUEST_LATENCY_BUCKETS),
      decode: hist('vllm:request_decode_time_seconds', 'Histogram of time spent in DECODE phase for request.', REQUEST_LATENCY_BUCKETS),
      promptTokens: hist('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', tokenBuckets),
      generationTokens: hist('vllm:request_generation_tokens', 'Number of generation tokens processed.', tokenBuckets),
      maxTokens: hist('vllm:request_params_max_tokens', 'Histogram of the max_tokens request parameter.', tokenBuckets),
      n: hist('vllm:request_params_n', 'Histogram of the n request parameter.', [1, 2, 5, 10, 20]),
      maxGeneration: hist('vllm:request_max_num_generation_tokens', 'Histogram of maximum number of requested generation tokens.', tokenBuckets),
      iteration: hist('vllm:iteration_tokens_total', 'Histogram of number of tokens per engine_step.', ITERATION_BUCKETS)
    };

    // A single-API-server vLLM serves prometheus_client's default registry (vllm/v1/metrics/prometheus.py), whose
    // process collector adds this gauge without labels; a new value is a new process: how a gateway tells a restart.
    new Gauge({ name: 'process_start_time_seconds', help: 'Start time of the process since unix epoch in seconds.', registers })
      .set(startTimeSeconds);

    const info = new Gauge({
      name: 'vllm:cache_config_info',
      help: 'Information of the LLMEngine CacheConfig',
      labelNames: ['block_size', 'cache_dtype', 'enable_prefix_caching', 'gpu_memory_utilization', 'num_cpu_blocks',
        'num_gpu_blocks', 'num_gpu_blocks_override', 'prefix_caching_hash_algo', 'engine'],
      registers
    });
    info.set({
      block_size: String(cache.blockSize),
      cache_dtype: 'auto',
      enable_prefix_caching: 'True',
      gpu_memory_utilization: String(cache.gpuMemoryUtilization),
      num_cpu_blocks: 'None',
      num_gpu_blocks: String(cache.numGpuBlocks),
      num_gpu_blocks_override: cache.numGpuBlocksOverride === null ? 'None' : String(cache.numGpuBlocksOverride),
      prefix_caching_hash_algo: 'sha256',
      engine: String(engineIndex)
    }, 1);
  }

  /** Brings the counters up to the engine's cumulative figures; called after every step. */
  syncCounters (s: EngineStats): void {
    const cur = { queries: s.prefixCacheQueries, hits: s.prefixCacheHits, prompt: s.promptTokens, generation: s.generationTokens, preemptions: s.preemptions };
    let iteration = 0;
    for (const k of Object.keys(cur) as Array<keyof typeof cur>) {
      const delta = cur[k] - this.last[k];
      if (delta > 0) {
        this.counters[k].inc(this.labels, delta);
        if (k === 'prompt' || k === 'generation') iteration += delta;
      }
      this.last[k] = cur[k];
    }
    if (iteration > 0) this.h.iteration.observe(this.labels, iteration);
  }

  observeInterTokenLatency (seconds: number, tokens: number): void {
    for (let i = 0; i < tokens; i++) this.h.itl.observe(this.labels, seconds / tokens);
  }

  observeFirstToken (seconds: number): void {
    this.h.ttft.observe(this.labels, Math.max(0, seconds));
  }

  observeFinished (r: FinishedRequest): void {
    const t = r.times;
    const l = this.labels;
    // A request that arrived between two chained steps may be scheduled at the earlier step's end.
    const d = (a: number, b: number): number => Math.max(0, a - b);
    this.success.inc({ ...l, finished_reason: r.finishReason });
    this.h.e2e.observe(l, d(t.finished, t.arrival));
    this.h.queue.observe(l, d(t.firstScheduled, t.arrival));
    this.h.inference.observe(l, d(t.finished, t.firstScheduled));
    this.h.prefill.observe(l, d(t.firstToken, t.firstScheduled));
    this.h.decode.observe(l, d(t.finished, t.firstToken));
    if (r.generationTokens > 1) this.h.tpot.observe(l, (d(t.finished, t.firstToken)) / (r.generationTokens - 1));
    this.h.promptTokens.observe(l, r.promptTokens);
    this.h.generationTokens.observe(l, r.generationTokens);
    this.h.maxTokens.observe(l, r.maxTokens);
    this.h.maxGeneration.observe(l, r.maxTokens);
    this.h.n.observe(l, r.n);
  }

  /** A request the client gave up on (disconnect). */
  observeAborted (): void {
    this.success.inc({ ...this.labels, finished_reason: 'abort' });
  }

  render (): Promise<string> { return this.registry.metrics(); }
  get contentType (): string { return this.registry.contentType; }
}
