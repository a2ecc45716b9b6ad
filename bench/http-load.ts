// The benchmarks' HTTP loads and their measure: the request bodies of each load (a short chat completion, streamed
// or not, a 130 KB prompt, an agent's session turns), one autocannon run against a target with the serving
// process's CPU time per response, and a sanity pass. Shared by bench/gateway.ts and bench/proxy-floor.ts.
import { readdirSync, readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { request } from 'undici';
import { BENCH_MODEL, CANNED_COMPLETION, CANNED_MESSAGE, CANNED_STREAM } from './upstream.js';
import { anthropicTurns, chatTurns } from './agent-turns.js';
import { assertAlive } from './processes.js';

const PATH = '/v1/chat/completions';

export type Load = 'short' | 'stream' | 'long' | 'turn' | 'cc-turn' | 'cc-chat';
export const LATENCY_LOADS: readonly Load[] = ['short', 'long', 'turn', 'cc-turn', 'cc-chat'];

function chatBody (content: string | Array<{ role: string; content: string }>, stream: boolean): string {
  const streamOptions = stream ? { stream_options: { include_usage: true } } : {};
  const messages = typeof content === 'string' ? [{ role: 'user', content }] : content;
  return JSON.stringify({ model: BENCH_MODEL, stream, ...streamOptions, messages, max_tokens: 32 });
}

/** ~130 KB of ordinary text: an agent's long context. */
function longPrompt (bytes: number): string {
  const line = 'The gateway reads this file, tokenizes it and hashes its blocks before it picks an engine. ';
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
}

/**
 * An agent's session turn: the same 130 KB as `long` with an x-session-id, sent alternately as a turn whose last
 * ~2k tokens (an assistant reply and a new user message) are new and as the turn before it, so every request
 * extends or rolls back the session's previous one by ~2k tokens (character tokenizer: a token a byte).
 */
function sessionTurns (): string[] {
  const head = longPrompt(128 * 1024);
  const prev = [{ role: 'user', content: head }];
  const next = [...prev, { role: 'assistant', content: 'Read it. What next?' }, { role: 'user', content: longPrompt(2 * 1024 - 40) }];
  return [chatBody(prev, false), chatBody(next, false)];
}

const BODIES: Record<Load, { bodies: string[]; headers?: Record<string, string>; expect: string; path?: string }> = {
  short: { bodies: [chatBody('Say hello in one short sentence.', false)], expect: CANNED_COMPLETION },
  stream: { bodies: [chatBody('Say hello in one short sentence.', true)], expect: CANNED_STREAM.join('') },
  long: { bodies: [chatBody(longPrompt(130 * 1024), false)], expect: CANNED_COMPLETION },
  turn: { bodies: sessionTurns(), headers: { 'x-session-id': 'bench-agent-session' }, expect: CANNED_COMPLETION },
  // Claude Code's ~115 KB turns on /v1/messages, and the same prompt as chat completions (bench/agent-turns.ts).
  'cc-turn': { bodies: anthropicTurns(BENCH_MODEL), headers: { 'x-claude-code-session-id': 'bench-cc-session' }, expect: CANNED_MESSAGE, path: '/v1/messages' },
  'cc-chat': { bodies: chatTurns(BENCH_MODEL), headers: { 'x-session-id': 'bench-cc-chat-session' }, expect: CANNED_COMPLETION }
};

// ---- measuring ----

export interface Target {
  name: string;
  url: string;
  /** The process that serves it (its children too: nginx's workers): its CPU time is charged to the target. */
  pid: number;
}

/** CPU seconds (user + system, all threads) of a process and its children, from /proc. */
function cpuSeconds (pid: number): number {
  let ticks = 0;
  const pids = [pid];
  for (const tid of safeList(`/proc/${pid}/task`)) {
    for (const c of safeRead(`/proc/${pid}/task/${tid}/children`).split(' ')) if (c.trim()) pids.push(Number(c));
  }
  for (const p of pids) {
    const stat = safeRead(`/proc/${p}/stat`);
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(f[11] ?? 0) + Number(f[12] ?? 0); // utime, stime: fields 14 and 15 of proc(5)
  }
  return ticks / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

function safeRead (path: string): string {
  try { return readFileSync(path, 'utf8'); } catch { return ''; }
}

function safeList (path: string): string[] {
  try { return readdirSync(path); } catch { return []; }
}

export interface Cell {
  target: string;
  load: Load;
  connections: number;
  requests: number;
  seconds: number;
  rps: number;
  /** CPU time the serving process spent per response, µs (the proxy's own cost, whatever else runs on the machine). */
  cpuUs: number;
  /** Latencies in ms, sorted. */
  latencies: Float64Array;
}

export function percentile (sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** One autocannon run. Any error, timeout, non-2xx or body other than the canned one fails the benchmark. */
export async function cannon (t: Target, load: Load, connections: number, seconds: number): Promise<Cell> {
  const { bodies, headers, expect } = BODIES[load];
  let lat = new Float64Array(1 << 16);
  let n = 0;
  // autocannon checks expectBody only for a single request; a cycle of requests is checked here.
  let wrong = 0;
  const check = (_status: number, got: string): void => { if (got !== expect) wrong++; };
  const inst = autocannon({
    url: `${t.url}${BODIES[load].path ?? PATH}`,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: bodies[0],
    // Each connection cycles through them in order.
    ...(bodies.length > 1 ? { requests: bodies.map((b) => ({ body: b, onResponse: check })) } : { expectBody: expect }),
    connections,
    pipelining: 1,
    duration: seconds,
    timeout: 10
  });
  // autocannon's own histogram keeps whole milliseconds; added latency is a matter of microseconds.
  inst.on('response', (_client, status, _bytes, ms) => {
    if (status < 200 || status >= 300) return;
    if (n === lat.length) {
      const next = new Float64Array(lat.length * 2);
      next.set(lat);
      lat = next;
    }
    lat[n++] = ms;
  });
  const cpu0 = cpuSeconds(t.pid);
  const r = await inst;
  const cpu = cpuSeconds(t.pid) - cpu0;
  const bad = r.errors + r.timeouts + r.non2xx + r.mismatches + wrong;
  if (bad > 0) {
    throw new Error(`${t.name} ${load} c=${connections}: ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx, ${r.mismatches + wrong} wrong bodies`);
  }
  if (n === 0) throw new Error(`${t.name} ${load} c=${connections}: no response at all`);
  assertAlive();
  const latencies = lat.slice(0, n).sort();
  return { target: t.name, load, connections, requests: n, seconds: r.duration, rps: n / r.duration, cpuUs: (cpu * 1e6) / n, latencies };
}

/** One request of each kind by hand, before any load: a server that answers wrongly fails here, plainly. */
export async function sanity (t: Target): Promise<void> {
  for (const load of ['short', 'stream', 'long', 'turn', 'cc-turn', 'cc-chat'] as const) {
    for (const body of BODIES[load].bodies) {
      const r = await request(`${t.url}${BODIES[load].path ?? PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', ...BODIES[load].headers }, body });
      const text = await r.body.text();
      if (r.statusCode !== 200 || text !== BODIES[load].expect) {
        throw new Error(`${t.name} ${load}: answered ${r.statusCode} ${text.slice(0, 300)}`);
      }
    }
  }
}

export function merge (cells: Cell[]): Cell {
  const all = new Float64Array(cells.reduce((s, c) => s + c.latencies.length, 0));
  let o = 0;
  for (const c of cells) {
    all.set(c.latencies, o);
    o += c.latencies.length;
  }
  const requests = cells.reduce((s, c) => s + c.requests, 0);
  const seconds = cells.reduce((s, c) => s + c.seconds, 0);
  const cpuUs = cells.reduce((s, c) => s + c.cpuUs * c.requests, 0) / requests;
  return { ...cells[0], requests, seconds, rps: requests / seconds, cpuUs, latencies: all.sort() };
}
