// The lab measures the code that serves: one request sequence (sessions, sub-agents, engine reports, first
// tokens, ends, retries) driven through the gateway's adapter (TableRouting, backends as the server holds them)
// and the discrete-event driver's (LabRouting) gives the same decisions, for every registered policy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach, type Region } from '../../../src/core/region.js';
import { BlockHasher } from '../../../src/core/block-keys.js';
import { PrefixIndexWriter } from '../../../src/core/prefix-index.js';
import { RingConsumer } from '../../../src/core/ring.js';
import { createPolicy, policyNames } from '../../../src/core/policies/index.js';
import { IndexFeeder } from '../../../src/kvevents/index-feeder.js';
import { Backend } from '../../../src/fleet/backends.js';
import { buildConfig } from '../../../src/config/index.js';
import { TableRouting } from '../../../src/fleet/table-routing.js';
import type { Placement as GatewayPlacement, RoutingInput } from '../../../src/fleet/routing-port.js';
import { LabRouting } from '../../../src/eval/drivers/lab-routing.js';
import type { Placement } from '../../../src/core/routing-host.js';
import { Rng } from '../../../src/eval/workloads/rng.js';

const MODEL = 'des';
const ENGINES = 4;
const BLOCK = 16;
const TTL = 60_000;

function region (): Region {
  return createAndAttach({ prefixIndexKeys: 1 << 14, sessions: 1024, heapJobs: 16, recordRingOps: 1 << 14, pods: 8, scratchSlots: 16, scratchBytes: 1 << 18 });
}

/** What both adapters are asked, in order. */
type Step =
  | { kind: 'route'; id: number; session: string | null; parent: string | null; tokens: number[]; retryOf: number | null }
  | { kind: 'first'; id: number }
  | { kind: 'end'; id: number; ok: boolean; completion: number }
  | { kind: 'report'; engine: number; running: number; waiting: number; kvUsage: number };

function script (seed: number, steps: number): Step[] {
  const rng = new Rng(seed, 1);
  const out: Step[] = [];
  const prompts = new Map<string, number[]>();
  const open: Array<{ id: number; first: boolean; session: string | null; tokens: number[]; parent: string | null }> = [];
  let next = 0;
  for (let i = 0; i < steps; i++) {
    const r = rng.next();
    if (r < 0.4 || open.length === 0) {
      const s = rng.next() < 0.85 ? `s${rng.int(12)}` : null;
      const parent = s !== null && rng.next() < 0.2 ? `s${rng.int(12)}` : null;
      // A turn extends the session's previous prompt (prefix reuse); a new session starts from a shared system prompt.
      const prev = (s !== null ? prompts.get(s) : undefined) ?? Array.from({ length: 64 }, (_, k) => k + 1);
      const tokens = prev.concat(Array.from({ length: 8 + rng.int(120) }, () => 1000 + rng.int(50_000)));
      if (s !== null) prompts.set(s, tokens);
      const id = next++;
      out.push({ kind: 'route', id, session: s, parent, tokens, retryOf: null });
      open.push({ id, first: false, session: s, tokens, parent });
    } else if (r < 0.55) {
      out.push({ kind: 'report', engine: rng.int(ENGINES), running: rng.int(40), waiting: rng.int(20), kvUsage: Math.round(rng.next() * 100) / 100 });
    } else {
      const j = rng.int(open.length);
      const o = open[j];
      if (!o.first && rng.next() < 0.7) {
        o.first = true;
        out.push({ kind: 'first', id: o.id });
      } else {
        open.splice(j, 1);
        const ok = o.first || rng.next() < 0.5;
        out.push({ kind: 'end', id: o.id, ok, completion: 1 + rng.int(300) });
        // A failure before the first token is retried on another pod.
        if (!ok) {
          const id = next++;
          out.push({ kind: 'route', id, session: o.session, parent: o.parent, tokens: o.tokens, retryOf: o.id });
          open.push({ id, first: false, session: o.session, tokens: o.tokens, parent: o.parent });
        }
      }
    }
  }
  return out;
}

interface Decision { id: number; pod: number; reason: string; matched: number; prefill: number }

function keysOf (hasher: BlockHasher, r: Region, tokens: number[]): BigUint64Array {
  const span = hasher.hash(tokens, BLOCK, hasher.rootSeed(MODEL));
  return new BigUint64Array(r.memory.buffer, span.ptr, span.count).slice();
}

/** One adapter under test: what the request path calls on it, in the script's order. */
interface Adapter {
  /** Routes and dispatches the request; returns the decision. */
  route (req: RoutingInput, exclude: ReadonlySet<number>, now: number): Decision & { token: unknown };
  firstToken (token: unknown, now: number): void;
  finished (token: unknown, req: RoutingInput, ok: boolean, completion: number, now: number): void;
  report (engine: number, s: Extract<Step, { kind: 'report' }>, now: number): void;
}

/** Plays the script against one adapter over its own region; returns its decisions. */
function play (make: (r: Region) => Adapter, steps: Step[]): Decision[] {
  const r = region();
  const a = make(r);
  const hasher = new BlockHasher(r);
  const live = new Map<number, { token: unknown; req: RoutingInput; exclude: Set<number> }>();
  const out: Decision[] = [];
  let now = 0;
  for (const s of steps) {
    now += 3;
    if (s.kind === 'route') {
      const exclude = s.retryOf === null ? new Set<number>() : live.get(s.retryOf)!.exclude;
      const req: RoutingInput = { model: MODEL, sessionId: s.session, parentSessionId: s.parent, promptTokens: s.tokens.length, blockKeys: keysOf(hasher, r, s.tokens), maxTokens: null, user: s.session };
      const { token, ...d } = a.route(req, exclude, now);
      exclude.add(d.pod);
      live.set(s.id, { token, req, exclude });
      out.push({ ...d, id: s.id });
    } else if (s.kind === 'first') {
      a.firstToken(live.get(s.id)!.token, now);
    } else if (s.kind === 'end') {
      const l = live.get(s.id)!;
      a.finished(l.token, l.req, s.ok, s.completion, now);
    } else {
      a.report(s.engine, s, now);
    }
  }
  return out;
}

/** The gateway's adapter, with backends as the server holds them. */
function gateway (policy: string) {
  return (r: Region): Adapter => {
    const config = buildConfig({ blockSize: BLOCK, backends: Array.from({ length: ENGINES }, (_, i) => ({ id: `engine-${i}`, url: `http://127.0.0.1:${9 + i}` })) });
    const draws = new Rng(7, 9);
    const routing = new TableRouting(r, createPolicy(policy), { blockSize: BLOCK, sessionTtlMs: TTL, random: () => draws.next() });
    // As the server admits its configured backends, then finds them healthy.
    const backends = config.backends.map((c) => {
      const b = new Backend(routing.admit(c.id), c, config);
      b.health = 'healthy';
      b.models = new Set([MODEL]);
      routing.backendChanged(b, 0);
      return b;
    });
    // The kv-events thread's part: apply the recorded keys (the gateway's thread does within its 1 ms gather).
    const feeder = new IndexFeeder(new PrefixIndexWriter(r), new RingConsumer(r), { assumedTtlMs: 20 * 60_000, expiryBudget: 4096 });
    return {
      route (req, exclude, now) {
        const p = routing.route(req, exclude, now, exclude.size);
        routing.started(p, req, now);
        feeder.pump();
        const hp = (p as unknown as { host: Placement }).host;
        return { id: -1, pod: p.backend.index, reason: p.reason, matched: hp.matchedBlocks, prefill: p.expectedPrefill, token: p };
      },
      firstToken: (t, now) => routing.firstToken(t as GatewayPlacement, now),
      finished: (t, req, ok, completion, now) => routing.finished(t as GatewayPlacement, req, ok ? { promptTokens: req.promptTokens, completionTokens: completion, cachedTokens: 0 } : null, ok, now),
      report: (engine, s, now) => routing.engineLoad(backends[engine], { running: s.running, waiting: s.waiting, kvUsage: s.kvUsage, numGpuBlocks: null, blockSize: null }, now)
    };
  };
}

/** The discrete-event driver's adapter. */
function lab (policy: string) {
  return (r: Region): Adapter => {
    const draws = new Rng(7, 9);
    const l = new LabRouting(r, { policy: createPolicy(policy), engines: ENGINES, model: MODEL, blockSize: BLOCK, kvEvents: 'approximate', random: () => draws.next(), sessionTtlMs: TTL });
    return {
      route (req, exclude, now) {
        const p = l.host.route(req, exclude, now, exclude.size);
        l.dispatched(p, now);
        return { id: -1, pod: p.pod, reason: p.reason, matched: p.matchedBlocks, prefill: p.expectedPrefill, token: p };
      },
      firstToken: (t, now) => l.firstToken(t as Placement, now),
      finished: (t, req, ok, completion, now) => l.finished(t as Placement, ok ? { promptTokens: req.promptTokens, completionTokens: completion } : null, now),
      report: (engine, s, now) => l.engineReport(engine, { running: s.running, waiting: s.waiting, kvUsage: s.kvUsage }, now)
    };
  };
}

test('the gateway\'s adapter and the lab\'s give the same decisions on the same sequence, for every policy', () => {
  const steps = script(11, 1500);
  const routes = steps.filter((s) => s.kind === 'route').length;
  assert.ok(routes > 400, `the script routes enough requests (${routes})`);
  for (const policy of policyNames()) {
    const gw = play(gateway(policy), steps);
    const lb = play(lab(policy), steps);
    assert.equal(gw.length, routes);
    assert.deepEqual(lb, gw, `policy ${policy}`);
    // Not a vacuous match: the sequence spreads over pods and hits the index.
    assert.ok(new Set(gw.map((d) => d.pod)).size > 1 || policy === 'sticky', `${policy} used more than one pod`);
    assert.ok(gw.some((d) => d.matched > 0), `${policy} matched cached blocks`);
  }
});
