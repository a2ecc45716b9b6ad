// Reads the load an engine reports on /metrics (Prometheus text) into the figures the load table keeps.
// vLLM and SGLang name them differently (../shared/specs/vllm-wire.md §3.5, §4); a data-parallel engine
// reports one series per rank (label `engine`), which add up (queues, KV capacity) or average (KV usage).
// vLLM's KV capacity comes from `vllm:cache_config_info` (a gauge of 1 whose labels are the CacheConfig fields).

export interface EngineLoad {
  running: number;
  waiting: number;
  /** KV cache usage 0..1. */
  kvUsage: number;
  /**
   * KV capacity in blocks: `num_gpu_blocks` of vllm:cache_config_info, summed over the engine's data-parallel
   * ranks (one series per `engine` label). Null when the engine does not say (SGLang, a vLLM without the series),
   * or when a rank says "None" or something that is not a count: a partial sum would understate the capacity.
   */
  numGpuBlocks: number | null;
  /** Tokens per KV block (`block_size` of vllm:cache_config_info); null when absent, not a count, or the ranks disagree. */
  blockSize: number | null;
}

const RUNNING = ['vllm:num_requests_running', 'sglang:num_running_reqs'];
const WAITING = ['vllm:num_requests_waiting', 'sglang:num_queue_reqs'];
// vllm:gpu_cache_usage_perc is the pre-0.12 name of vllm:kv_cache_usage_perc.
const KV_USAGE = ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'sglang:token_usage'];
const CACHE_CONFIG = 'vllm:cache_config_info';

/**
 * The labels of a sample line whose '{' is at `brace`: name → value, unescaped. Values are quoted in the text
 * format (escapes \\ \" \n); an unquoted value is read up to the next ',' or '}' so a sloppy exporter still reads.
 */
export function parseLabels (line: string, brace: number): Map<string, string> {
  const out = new Map<string, string>();
  let i = brace + 1;
  const n = line.length;
  for (;;) {
    while (i < n && (line[i] === ' ' || line[i] === ',')) i++;
    if (i >= n || line[i] === '}') return out;
    const eq = line.indexOf('=', i);
    if (eq < 0) return out;
    const name = line.slice(i, eq).trim();
    i = eq + 1;
    while (i < n && line[i] === ' ') i++;
    let value = '';
    if (line[i] === '"') {
      i++;
      while (i < n && line[i] !== '"') {
        if (line[i] === '\\' && i + 1 < n) {
          const c = line[i + 1];
          value += c === 'n' ? '\n' : c;
          i += 2;
        } else {
          value += line[i++];
        }
      }
      i++; // the closing quote
    } else {
      const start = i;
      while (i < n && line[i] !== ',' && line[i] !== '}') i++;
      value = line.slice(start, i).trim();
    }
    out.set(name, value);
  }
}

/** A label value that is a count ("26972", "16.0"); null for "None", "", or anything else. */
function count (v: string | undefined): number | null {
  if (v === undefined) return null;
  const s = v.trim();
  if (s === '' || !/^[0-9]+(\.0*)?$/.test(s)) return null;
  const x = Number(s);
  return Number.isSafeInteger(x) ? x : null;
}

/** Parses the text; returns null when it holds none of the known load series (not an engine we understand). */
export function parseEngineMetrics (text: string): EngineLoad | null {
  const sums = new Map<string, { sum: number; n: number }>();
  /** cache_config_info per rank (its `engine` label; '' when absent): the last series of a rank wins. */
  const cache = new Map<string, { blocks: number | null; blockSize: number | null }>();
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
    const hasLabels = brace >= 0 && brace < space;
    const name = hasLabels ? line.slice(0, brace) : line.slice(0, space);
    if (!name.startsWith('vllm:') && !name.startsWith('sglang:')) continue;
    if (name === CACHE_CONFIG) {
      // An info gauge: what it says is in its labels, whatever its value.
      if (!hasLabels) continue;
      const labels = parseLabels(line, brace);
      cache.set(labels.get('engine') ?? '', { blocks: count(labels.get('num_gpu_blocks')), blockSize: count(labels.get('block_size')) });
      continue;
    }
    // The value follows the closing brace (label values may hold spaces) and may be followed by a timestamp.
    const afterLabels = hasLabels ? line.lastIndexOf('}') + 1 : space;
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
  let numGpuBlocks: number | null = null;
  let blockSize: number | null = null;
  if (cache.size > 0) {
    const ranks = [...cache.values()];
    if (ranks.every((c) => c.blocks !== null)) numGpuBlocks = ranks.reduce((a, c) => a + c.blocks!, 0);
    const sizes = new Set(ranks.map((c) => c.blockSize));
    if (sizes.size === 1) blockSize = ranks[0].blockSize;
  }
  return {
    running: running?.sum ?? 0,
    waiting: waiting?.sum ?? 0,
    kvUsage: kv ? Math.min(1, Math.max(0, kv.sum / kv.n)) : 0,
    numGpuBlocks,
    blockSize
  };
}

const START_TIME = 'process_start_time_seconds';

/**
 * The engine process's start (epoch seconds) from prometheus_client's process collector, which a single-API-server
 * vLLM serves: a different value on a later scrape is a restarted engine. Null when absent (a
 * multiprocess registry has no process collector) or not a positive number.
 */
export function parseProcessStartTime (text: string): number | null {
  for (let at = text.indexOf(START_TIME); at >= 0; at = text.indexOf(START_TIME, at + 1)) {
    // A sample line: the name at a line's start (not in a HELP or TYPE line), then labels or a space.
    if (at > 0 && text[at - 1] !== '\n') continue;
    let rest = at + START_TIME.length;
    if (text[rest] === '{') rest = text.indexOf('}', rest) + 1;
    else if (text[rest] !== ' ') continue; // a longer name
    if (rest <= 0) return null;
    const end = text.indexOf('\n', rest);
    const value = Number.parseFloat(text.slice(rest, end < 0 ? text.length : end).trim().split(/\s+/)[0]);
    return Number.isFinite(value) && value > 0 ? value : null;
  }
  return null;
}
