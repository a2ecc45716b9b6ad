// Reading the gateway's /metrics for the soak, and the least-squares slope that says whether memory is flat.
import { readFileSync } from 'node:fs';

/** Prometheus text → value by series (`name{labels}` exactly as printed; `name` alone when unlabelled). */
export function parseMetrics (text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

/** The series of metric `name`, keyed by the value of `label` (summed over the other labels). */
export function byLabel (m: Map<string, number>, name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  const re = new RegExp(`${label}="([^"]*)"`);
  for (const [k, v] of m) {
    if (!k.startsWith(`${name}{`)) continue;
    const l = re.exec(k)?.[1] ?? '';
    out[l] = (out[l] ?? 0) + v;
  }
  return out;
}

/** Sum of every series of metric `name` (0 when absent). */
export function total (m: Map<string, number>, name: string): number {
  let s = 0;
  for (const [k, v] of m) if (k === name || k.startsWith(`${name}{`)) s += v;
  return s;
}

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than two distinct x. */
export function slope (points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  let mx = 0;
  let my = 0;
  for (const [x, y] of points) { mx += x / n; my += y / n; }
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) { sxy += (x - mx) * (y - my); sxx += (x - mx) ** 2; }
  return sxx === 0 ? 0 : sxy / sxx;
}

/**
 * The lowest sample of each `window`-wide bucket of x: a heap's floor after collections. Raw heap samples
 * saw-tooth between collections by more than a slow leak moves them in an hour; the floors follow the live set.
 */
export function windowMinima (points: ReadonlyArray<readonly [number, number]>, window: number): Array<[number, number]> {
  const buckets = new Map<number, [number, number]>();
  for (const [x, y] of points) {
    const b = Math.floor(x / window);
    const cur = buckets.get(b);
    if (cur === undefined || y < cur[1]) buckets.set(b, [x, y]);
  }
  return [...buckets.values()].sort((a, b) => a[0] - b[0]);
}

/**
 * The resident and mapped bytes of the gateway's shared WebAssembly memory (the routing tables' region, one
 * fixed-size allocation): the largest writable anonymous mapping of the process, from /proc/PID/smaps (Linux).
 * Its slots are zero until first used and never written at start-up, so its pages fault in as random keys land
 * on them (a 1 GiB region fills over tens of minutes of soak): bounded by its size, never a leak. null when
 * smaps cannot be read.
 */
export function sharedRegionResident (pid: number): { rss: number; size: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return null;
  }
  let best: { rss: number; size: number } | null = null;
  let cur: { rss: number; size: number } | null = null;
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m !== null) {
      const size = parseInt(m[2], 16) - parseInt(m[1], 16);
      cur = m[3].startsWith('rw') && m[4] === '' ? { rss: 0, size } : null;
      if (cur !== null && (best === null || size > best.size)) best = cur;
      continue;
    }
    if (cur !== null && line.startsWith('Rss:')) cur.rss = Number(line.split(/\s+/)[1]) * 1024;
  }
  return best;
}
