// Fuzzes the running gateway (issue 13 item 4): `ear serve` in front of two `ear sim` engines, fed generated
// requests (bench/fuzz-cases.ts: chat, completions, contexts, Messages, count_tokens and Responses bodies, headers,
// framing, compressed bodies) as raw bytes over TCP with an API key that has a tokens-per-minute limit, each
// judged by oracles: an answer within a bound, below 500 and never 429 for a client's mistake, error bodies in
// the API's shape, 200 and a well-formed body for valid requests, admin routes unreachable without the token.
// After the run: the process alive, /health answering, nothing left in flight, the key's token bucket full
// again (nothing left charged), RSS growth bounded. A violation is shrunk by fast-check and printed.
//   npm run fuzz -- --cases 100000 [--seed S] [--concurrency C] [--families messages-body,responses-body,…]
// test/gateway/fuzz.test.ts runs the same module with a fixed seed.
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { simFleet, type SimFleet } from '../test/fixtures/processes.js';
import { FAMILIES, FUZZ_KEY, fuzzCase, fuzzCaseOf, requestBytes, type Family, type FuzzCase } from './fuzz-cases.js';
import { rawExchange, type RawAnswer } from './raw-http.js';
import { gitCommit, machine } from './machine.js';

export interface FuzzOptions {
  cases: number;
  seed: number;
  /** Cases in flight at once. */
  concurrency: number;
  /** The bound on one answer. */
  caseTimeoutMs?: number;
  /** RSS growth allowed from the end of warm-up (the first fifth of the cases) to the end. */
  rssGrowthBytes?: number;
  log?: (line: string) => void;
  /** Only these families (default: all). */
  families?: readonly Family[];
}

export interface Violation { kase: FuzzCase; reason: string; answer: string }

export interface FuzzReport {
  seed: number;
  cases: number;
  /** Requests sent, by family and outcome (the status, or closed / timeout), shrinking runs included. */
  counts: Record<string, Record<string, number>>;
  /** Violations by reason. */
  violations: Record<string, number>;
  /** The first violation of each reason and its shrunk counterexample (shrinks -1: the replay passed). */
  failures: Array<{ first: Violation; shrunk: Violation | null; shrinks: number }>;
  rssWarmBytes: number;
  rssEndBytes: number;
  gatewayAlive: boolean;
  healthOk: boolean;
  /** Requests still in flight (per backend) or queued for admission once the run settled. */
  leftInFlight: number;
  /**
   * The fuzz key's tokens-per-minute bucket once the run settled: its remaining tokens (a negative count is a
   * debt) and whether it filled up again within REFILL_BOUND_MS (false: a request left the key charged).
   */
  keyTokens: { remaining: number; limit: number; reset: string; full: boolean } | null;
  seconds: number;
  passed: boolean;
}

/** A limit the run never reaches (1e9 tokens a minute, refilled in well under a second what a case uses): a key
 * left charged after its requests ended shows as a bucket that does not fill up again. */
export const FUZZ_TOKENS_PER_MINUTE = 1_000_000_000;
const FLEET_CONFIG = ['scheduler: atlas', 'maxContexts: 100000', `apiKeys: [${FUZZ_KEY}]`, 'rateLimits:', '  keys:', `    ${FUZZ_KEY}: {tokensPerMinute: ${FUZZ_TOKENS_PER_MINUTE}}`];
/** Huge-number cases named beside a 429 (bench/fuzz-cases.ts puts the field and number in the kind). */
const RECENT_HUGE = 6;
/** How long the key's token bucket may take to fill up once the run settled. */
const REFILL_BOUND_MS = 10_000;
const FRAMING_BOUND_MS = 1000;
/** Cases generated at a time (one fast-check seed each). */
const BATCH = 100;
/** Violations shrunk (the first of each distinct reason, at most this many). */
const MAX_SHRUNK = 8;
/** Distinct violation reasons counted apart. */
const MAX_REASONS = 64;
/** Time one shrink may take (fast-check keeps the smallest failing case found by then). */
const SHRINK_LIMIT_MS = 90_000;

function rssOf (pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? 0 : Number(m[1]) * 1024;
}

/** Anthropic's error shape: {"type":"error","error":{"type": string, "message": string}}. */
function anthropicError (body: Buffer): boolean {
  try {
    const j = JSON.parse(body.toString('utf8')) as { type?: unknown; error?: { message?: unknown; type?: unknown } };
    return j.type === 'error' && typeof j.error === 'object' && j.error !== null && typeof j.error.message === 'string' && typeof j.error.type === 'string';
  } catch {
    return false;
  }
}

/** Whether a target is one of Anthropic's routes (/v1/messages and below), whose errors are in Anthropic's shape. */
const anthropicRoute = (target: string): boolean => /^\/v1\/messages(\/|\?|$)/.test(target);

/** OpenAI error shape: {"error":{"message": string, "type": string, "code": …}}. */
function openAiError (body: Buffer): boolean {
  try {
    const e = (JSON.parse(body.toString('utf8')) as { error?: { message?: unknown; type?: unknown; code?: unknown } }).error;
    return typeof e === 'object' && e !== null && typeof e.message === 'string' && typeof e.type === 'string' && 'code' in e;
  } catch {
    return false;
  }
}

/** Why a 200 body of a completion route is malformed, or null when it is well formed. */
function malformed200 (c: FuzzCase, r: RawAnswer): string | null {
  const text = r.body.toString('utf8');
  const type = r.headers.find(([k]) => k === 'content-type')?.[1] ?? '';
  const agentApi = agentApi200(c, text, type.includes('text/event-stream'));
  if (agentApi !== undefined) return agentApi;
  if (type.includes('text/event-stream')) {
    const events = text.split('\n\n').map((e) => e.trim()).filter((e) => e !== '');
    if (events.length === 0 || events[events.length - 1] !== 'data: [DONE]') return 'stream does not end with data: [DONE]';
    let chunks = 0;
    for (const e of events.slice(0, -1)) {
      if (!e.startsWith('data: ')) return `stream event is not a data line: ${e.slice(0, 80)}`;
      let j: { choices?: unknown; error?: unknown };
      try {
        j = JSON.parse(e.slice(6));
      } catch {
        return `stream event is not JSON: ${e.slice(0, 80)}`;
      }
      if (j.error !== undefined) return `stream carries an error: ${e.slice(0, 200)}`;
      if (Array.isArray(j.choices)) chunks++;
    }
    return chunks === 0 ? 'stream has no chunk with choices' : null;
  }
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(text);
  } catch {
    return `200 body is not JSON: ${text.slice(0, 80)}`;
  }
  if (c.target.startsWith('/v1/context')) return typeof j.id === 'string' && typeof j.backend === 'string' ? null : '200 context answer without id/backend';
  if (!Array.isArray(j.choices) || j.choices.length === 0) return '200 completion without choices';
  return null;
}

/** malformed200 for Messages, count_tokens and Responses (undefined for another route). */
function agentApi200 (c: FuzzCase, text: string, stream: boolean): string | null | undefined {
  const path = c.target.split('?')[0];
  if (path === '/v1/messages' || path === '/v1/responses') {
    if (stream) {
      const end = path === '/v1/messages' ? /event: message_stop/ : /event: response\.(completed|incomplete)/;
      if (/event: error/.test(text)) return `stream carries an error: ${text.slice(text.indexOf('event: error'), text.indexOf('event: error') + 200)}`;
      return end.test(text) ? null : `stream does not end with its final event: ${text.slice(-120)}`;
    }
    try {
      const j = JSON.parse(text) as { type?: unknown; object?: unknown };
      return (path === '/v1/messages' ? j.type === 'message' : j.object === 'response') ? null : `200 body is not a ${path === '/v1/messages' ? 'message' : 'response'}: ${text.slice(0, 80)}`;
    } catch {
      return `200 body is not JSON: ${text.slice(0, 80)}`;
    }
  }
  if (path === '/v1/messages/count_tokens') {
    try {
      return typeof (JSON.parse(text) as { input_tokens?: unknown }).input_tokens === 'number' ? null : `200 count without input_tokens: ${text.slice(0, 80)}`;
    } catch {
      return `200 body is not JSON: ${text.slice(0, 80)}`;
    }
  }
  return undefined;
}

/** The oracles for one exchange: null when the gateway did right. */
export function judge (c: FuzzCase, r: RawAnswer): string | null {
  if (r.kind === 'timeout') return r.status > 0 ? `response started (status ${r.status}) but did not end within the bound` : 'no answer within the bound';
  if (r.kind === 'held') return c.expect === 'framing' ? null : 'connection held without an answer';
  if (r.kind === 'closed') return c.expect === 'framing' ? null : `connection closed without a complete answer${r.status > 0 ? ` (status ${r.status})` : ''}`;
  if (r.status >= 500) return `status ${r.status} for a client's request`;
  const head = c.method.toUpperCase() === 'HEAD';
  if (c.expect === 'ok' && r.status !== 200) return `valid request answered ${r.status}`;
  const isJson = (r.headers.find(([k]) => k === 'content-type')?.[1] ?? '').includes('application/json');
  // Errors are in the API's shape: Anthropic's on its routes, OpenAI's elsewhere; uWS's own answers to broken
  // framing carry no JSON type.
  if (r.status >= 400 && !head && (c.expect !== 'framing' || isJson)) {
    if (anthropicRoute(c.target) ? !anthropicError(r.body) : !openAiError(r.body)) return `error body is not ${anthropicRoute(c.target) ? 'Anthropic' : 'OpenAI'}-style: ${r.body.toString('utf8').slice(0, 120)}`;
  }
  // A client's huge or negative number must be refused (or served), never turned into a 429 of its own charge.
  if (r.status === 429 && c.expect !== 'framing') return `429 for a client's request (the key in debt: a charge another request ran up)`;
  const decoded = (() => { try { return decodeURIComponent(c.target); } catch { return c.target; } })().toLowerCase();
  if (r.status === 200 && c.kind !== 'admin-token' && c.family === 'method-path' && decoded.includes('admin')) return 'an admin route answered 200 without the token';
  if (r.status === 200 && c.raw === null && c.method === 'POST' && ['/v1/chat/completions', '/v1/completions', '/v1/context', '/v1/messages', '/v1/messages/count_tokens', '/v1/responses'].includes(c.target)) return malformed200(c, r);
  return null;
}

function short (s: string, n = 400): string {
  return s.length <= n ? JSON.stringify(s) : `${JSON.stringify(s.slice(0, n))}…(${s.length} bytes)`;
}

export function describeCase (c: FuzzCase): string {
  const parts = [`family=${c.family} kind=${c.kind} expect=${c.expect}`];
  if (c.raw !== null) parts.push(`raw=${short(c.raw)}`);
  else parts.push(`${short(c.method, 40)} ${short(c.target, 200)}`, `headers=${short(JSON.stringify(c.headers), 300)}`, `body=${short(c.body)}`);
  if (c.halfClose) parts.push('then FIN');
  return parts.join('\n    ');
}

const answerText = (r: RawAnswer): string => `${r.kind}${r.status > 0 ? ` ${r.status}` : ''}: ${short(r.raw.toString('latin1'), 300)}`;

/** The fuzz key's token bucket as its rate-limit headers say (x-ratelimit-*-tokens of a GET /v1/models). */
async function keyTokens (gw: string): Promise<{ remaining: number; limit: number; reset: string }> {
  const res = await fetch(`${gw}/v1/models`, { headers: { authorization: `Bearer ${FUZZ_KEY}` } });
  await res.arrayBuffer();
  return { remaining: Number(res.headers.get('x-ratelimit-remaining-tokens')), limit: Number(res.headers.get('x-ratelimit-limit-tokens')), reset: res.headers.get('x-ratelimit-reset-tokens') ?? '' };
}

async function inFlightLeft (gw: string): Promise<number> {
  const t = await (await fetch(`${gw}/metrics`)).text();
  let n = 0;
  for (const l of t.split('\n')) if (l.startsWith('ear_backend_in_flight{') || l.startsWith('ear_admission_queue_depth{')) n += Number(l.slice(l.lastIndexOf(' ') + 1));
  return n;
}

/** The fleet the fuzzer runs against: `ear serve` in front of two `ear sim` engines that answer at once. */
export function fuzzFleet (): Promise<SimFleet> {
  return simFleet(FLEET_CONFIG, () => [['--time-scale', '0'], ['--time-scale', '0']]);
}

/** Runs the fuzzer against `given` (left running), or against a fleet of its own (started and stopped here). */
export async function runFuzz (opts: FuzzOptions, given?: SimFleet): Promise<FuzzReport> {
  const log = opts.log ?? (() => {});
  const timeoutMs = opts.caseTimeoutMs ?? 60_000;
  const t0 = Date.now();
  const fleet: SimFleet = given ?? await fuzzFleet();
  try {
    const port = Number(new URL(fleet.url).port);
    const pid = fleet.gateway.child.pid!;
    const families = opts.families ?? FAMILIES;
    const arbitrary = opts.families === undefined ? fuzzCase : fuzzCaseOf(families);
    const counts: Record<string, Record<string, number>> = Object.fromEntries(families.map((f) => [f, {}]));
    const failures: FuzzReport['failures'] = [];
    const violations: Record<string, number> = {};
    let sent = 0;
    let dead = false;
    let rssWarm = 0;
    const warmAt = Math.max(1, Math.floor(opts.cases / 5));
    let nextLog = Date.now() + 30_000;
    let nextTable = Date.now() + 300_000;

    let recentHuge: string[] = [];
    /** Sends one case; the violation, or null. */
    const exchange = async (c: FuzzCase): Promise<Violation | null> => {
      // uWS holds a connection whose framing it refused, without an answer, until its 10 s idle timeout: a broken
      // request gets a short bound, and still open at its end it counts as `held` (allowed), not as a hang.
      // Recorded as sent: the request that ran up a debt may still be in flight when another is refused.
      if (c.kind.startsWith('huge-number')) recentHuge = [...recentHuge.slice(-(RECENT_HUGE - 1)), `${c.kind} on ${c.target}`];
      const r = await rawExchange(port, requestBytes(c, '127.0.0.1'), c.expect === 'framing' ? FRAMING_BOUND_MS : timeoutMs, c.halfClose);
      if (c.expect === 'framing' && r.kind === 'timeout' && r.status === 0) r.kind = 'held';
      sent++;
      const outcome = r.kind === 'answered' ? String(r.status) : r.kind;
      const row = counts[c.family as Family];
      row[outcome] = (row[outcome] ?? 0) + 1;
      if (sent === warmAt) rssWarm = rssOf(pid);
      if (Date.now() > nextLog) {
        nextLog = Date.now() + 30_000;
        log(`  ${sent} requests, ${Math.round((Date.now() - t0) / 1000)} s, gateway RSS ${(rssOf(pid) / 2 ** 20).toFixed(0)} MiB, ${Object.values(violations).reduce((a, b) => a + b, 0)} violations`);
        if (Date.now() > nextTable) {
          nextTable = Date.now() + 300_000;
          log(formatCounts(counts));
        }
      }
      if (r.kind === 'answered' && r.status === 200 && c.target === '/v1/context' && c.method === 'POST') {
        // A created context is deleted again, so the run does not fill the registry.
        const id = (() => { try { return (JSON.parse(r.body.toString('utf8')) as { id?: unknown }).id; } catch { return undefined; } })();
        if (typeof id === 'string') await rawExchange(port, Buffer.from(`DELETE /v1/context/${encodeURIComponent(id)} HTTP/1.1\r\nhost: x\r\n\r\n`), timeoutMs);
      }
      if (fleet.gateway.child.exitCode !== null || fleet.gateway.child.signalCode !== null) {
        dead = true;
        return { kase: c, reason: `the gateway exited (${fleet.gateway.child.exitCode ?? fleet.gateway.child.signalCode})`, answer: answerText(r) };
      }
      const why = judge(c, r);
      if (why === null) return null;
      // A 429 is the key's debt, which another request ran up: the huge numbers sent before it are the suspects.
      const suspects = r.status === 429 && recentHuge.length > 0 ? `\n  huge numbers sent before it, answered or not yet (the last ${recentHuge.length}):\n    ${recentHuge.join('\n    ')}` : '';
      return { kase: c, reason: why, answer: answerText(r) + suspects };
    };

    // Cases come in batches of BATCH generated from seed + batch number, taken in turn by `concurrency` senders:
    // case j of a batch is fast-check's run j of that seed (path "j"), so a violation is replayed and shrunk from
    // there. The run goes on past violations (all are counted by reason); the first of each reason is shrunk.
    const batches = Math.ceil(opts.cases / BATCH);
    let nextBatch = 0;
    const pending: Array<{ seed: number; path: string; v: Violation }> = [];
    const senders = Array.from({ length: opts.concurrency }, async () => {
      for (let b = nextBatch++; b < batches && !dead; b = nextBatch++) {
        const n = Math.min(BATCH, opts.cases - b * BATCH);
        const cases = fc.sample(arbitrary, { seed: opts.seed + b, numRuns: n });
        for (const [j, c] of cases.entries()) {
          if (dead) break;
          const v = await exchange(c);
          if (v === null) continue;
          // Reasons quote answers, so they vary: the map keeps MAX_REASONS of them and counts the rest together.
          const key = v.reason in violations || Object.keys(violations).length < MAX_REASONS ? v.reason : '(other reasons)';
          violations[key] = (violations[key] ?? 0) + 1;
          if (!pending.some((p) => p.v.reason === v.reason) && pending.length < MAX_SHRUNK) pending.push({ seed: opts.seed + b, path: String(j), v });
        }
      }
    });
    await Promise.all(senders);
    for (const p of pending) {
      if (dead) {
        failures.push({ first: p.v, shrunk: null, shrinks: 0 });
        continue;
      }
      let lastSeen: Violation | null = null;
      const d = await fc.check(fc.asyncProperty(arbitrary, async (c) => {
        if (dead) return;
        const v = await exchange(c);
        if (v === null) return;
        lastSeen = v;
        throw new Error(v.reason);
      }), { seed: p.seed, path: p.path, interruptAfterTimeLimit: SHRINK_LIMIT_MS });
      // The last violation seen is fast-check's final (shrunk) counterexample; a replay that passed is flaky.
      failures.push({ first: p.v, shrunk: d.failed && d.numShrinks > 0 ? lastSeen : null, shrinks: d.failed ? d.numShrinks : -1 });
    }

    const gatewayAlive = fleet.gateway.child.exitCode === null && fleet.gateway.child.signalCode === null;
    let healthOk = false;
    let leftInFlight = -1;
    let rssEnd = 0;
    let tokens: FuzzReport['keyTokens'] = null;
    if (gatewayAlive) {
      healthOk = (await rawExchange(port, Buffer.from('GET /health HTTP/1.1\r\nhost: x\r\n\r\n'), timeoutMs)).status === 200;
      // In-flight figures settle once the last upstream exchanges end.
      for (let i = 0; i < 50; i++) {
        leftInFlight = await inFlightLeft(fleet.url);
        if (leftInFlight === 0) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      rssEnd = rssOf(pid);
      // Every request ended: what they charged the key is refunded or explained by their usage, which the
      // bucket refills within a second at FUZZ_TOKENS_PER_MINUTE. A bucket still short after that is a charge
      // a request left behind.
      const until = Date.now() + REFILL_BOUND_MS;
      for (;;) {
        const t = await keyTokens(fleet.url);
        tokens = { ...t, full: t.remaining === t.limit };
        if (tokens.full || Date.now() > until) break;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    const rssOk = rssEnd - rssWarm <= (opts.rssGrowthBytes ?? 128 * 2 ** 20);
    const passed = failures.length === 0 && Object.keys(violations).length === 0 && gatewayAlive && healthOk && leftInFlight === 0 && rssOk && tokens?.full === true;
    return { seed: opts.seed, cases: sent, counts, violations, failures, rssWarmBytes: rssWarm, rssEndBytes: rssEnd, gatewayAlive, healthOk, leftInFlight, keyTokens: tokens, seconds: (Date.now() - t0) / 1000, passed };
  } finally {
    if (given === undefined) await fleet.close();
  }
}

/** Requests by family and outcome, as a markdown table. */
export function formatCounts (counts: FuzzReport['counts']): string {
  const outcomes = [...new Set(Object.values(counts).flatMap((o) => Object.keys(o)))].sort();
  const lines = [`| family | ${outcomes.join(' | ')} | total |`, `|---|${outcomes.map(() => '---:|').join('')}---:|`];
  for (const [f, o] of Object.entries(counts)) {
    lines.push(`| ${f} | ${outcomes.map((k) => String(o[k] ?? 0)).join(' | ')} | ${Object.values(o).reduce((a, b) => a + b, 0)} |`);
  }
  return lines.join('\n');
}

/** The report as printed: counts by family and outcome, the after-run checks, each failure. */
export function formatReport (r: FuzzReport): string {
  const lines = [formatCounts(r.counts)];
  const mib = (b: number): string => (b / 2 ** 20).toFixed(1);
  lines.push('', `requests: ${r.cases} in ${r.seconds.toFixed(0)} s (seed ${r.seed}); gateway alive: ${r.gatewayAlive}; /health: ${r.healthOk ? 200 : 'no'}; ` +
    `left in flight: ${r.leftInFlight}; RSS after warm-up ${mib(r.rssWarmBytes)} MiB, at the end ${mib(r.rssEndBytes)} MiB (${r.rssEndBytes >= r.rssWarmBytes ? '+' : ''}${mib(r.rssEndBytes - r.rssWarmBytes)} MiB)`);
  const k = r.keyTokens;
  lines.push(k === null ? 'key tokens: not read (the gateway is gone)'
    : `key tokens: ${k.remaining} of ${k.limit} remaining (reset ${k.reset})${k.full ? '' : ` — VIOLATION: the key is still charged ${REFILL_BOUND_MS / 1000} s after its last request ended`}`);
  for (const [why, n] of Object.entries(r.violations)) lines.push(`violations: ${n} × ${why}`);
  for (const f of r.failures) {
    lines.push('', `FAILURE: ${f.first.reason}`, `  first case:\n    ${describeCase(f.first.kase)}`, `  answer: ${f.first.answer}`);
    if (f.shrinks === -1) lines.push('  (its replay passed: it depends on what ran beside it)');
    if (f.shrunk) lines.push(`  shrunk (${f.shrinks} steps): ${f.shrunk.reason}\n    ${describeCase(f.shrunk.kase)}`, `  answer: ${f.shrunk.answer}`);
  }
  lines.push('', r.passed ? 'PASS' : 'FAIL');
  return lines.join('\n');
}

async function main (): Promise<void> {
  const { values } = parseArgs({ options: { cases: { type: 'string', default: '100000' }, seed: { type: 'string' }, concurrency: { type: 'string', default: '32' }, families: { type: 'string' } } });
  const families = values.families?.split(',').map((f) => f.trim()) as Family[] | undefined;
  const unknown = families?.filter((f) => !FAMILIES.includes(f));
  if (unknown !== undefined && unknown.length > 0) throw new Error(`--families: no family ${unknown.join(', ')} (families: ${FAMILIES.join(', ')})`);
  const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
  const opts: FuzzOptions = { cases: Number(values.cases), seed, concurrency: Number(values.concurrency), log: (l) => console.log(l), families };
  console.log(`fuzzing the gateway: ${opts.cases} cases, seed ${seed}, concurrency ${opts.concurrency}${families ? `, families ${families.join(',')}` : ''}; ${machine()}; commit ${gitCommit()}`);
  const report = await runFuzz(opts);
  console.log(formatReport(report));
  process.exitCode = report.passed ? 0 : 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    console.error(err);
    process.exit(2);
  });
}
