// Reads the load an engine reports on /metrics (Prometheus text) into the figures the load table keeps.
// vLLM and SGLang name them differently (../shared/specs/vllm-wire.md §3.5, §4); a data-parallel engine
// reports one series per rank (label `engine`), which add up (queues) or average (KV usage).

export interface EngineLoad {
  running: number;
  waiting: number;
  /** KV cache usage 0..1. */
  kvUsage: number;
}

const RUNNING = ['vllm:num_requests_running', 'sglang:num_running_reqs'];
const WAITING = ['vllm:num_requests_waiting', 'sglang:num_queue_reqs'];
// vllm:gpu_cache_usage_perc is the pre-0.12 name of vllm:kv_cache_usage_perc.
const KV_USAGE = ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'sglang:token_usage'];

/** Parses the text; returns null when it holds none of the known series (not an engine we understand). */
export function parseEngineMetrics (text: string): EngineLoad | null {
  const sums = new Map<string, { sum: number; n: number }>();
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    if (line === '' || line.charCodeAt(0) === 35 /* # */) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    if (space < 0) continue;
    const name = brace >= 0 && brace < space ? line.slice(0, brace) : line.slice(0, space);
    if (!name.startsWith('vllm:') && !name.startsWith('sglang:')) continue;
    // The value follows the closing brace (label values may hold spaces) and may be followed by a timestamp.
    const afterLabels = brace >= 0 && brace < space ? line.lastIndexOf('}') + 1 : space;
    const value = Number.parseFloat(line.slice(afterLabels).trim().split(/\s+/)[0]);
    if (!Number.isFinite(value)) continue;
    const s = sums.get(name) ?? { sum: 0, n: 0 };
    s.sum += value;
    s.n += 1;
    sums.set(name, s);
  }
  const first = (names: string[]): { sum: number; n: number } | undefined => {
    for (const n of names) {
      const s = sums.get(n);
      if (s) return s;
    }
    return undefined;
  };
  const running = first(RUNNING);
  const waiting = first(WAITING);
  const kv = first(KV_USAGE);
  if (!running && !waiting && !kv) return null;
  return {
    running: running?.sum ?? 0,
    waiting: waiting?.sum ?? 0,
    kvUsage: kv ? Math.min(1, Math.max(0, kv.sum / kv.n)) : 0
  };
}
