// What the admission scheduler costs a request when it passes through (no backend signals capacity): one
// request's whole life in the routing host (decide, dispatch, first token, end) through submit() with the
// scheduler on (`atlas`) against route() + dispatched() with it off, interleaved rounds in one process.
// Issue 11's target: ≤ 5 µs a request. Run: node dist/bench/admission.js [rounds]
import { createAndAttach } from '../src/core/region.js';
import { RoutingHost, type HostRequest, type Placement } from '../src/core/routing-host.js';
import { type AdmissionWaiter } from '../src/core/admission-control.js';
import type { SchedulerKind } from '../src/core/admission.js';
import { createPolicy } from '../src/core/policies/index.js';

const N = 100_000;

function host (scheduler: SchedulerKind): RoutingHost {
  const region = createAndAttach({ prefixIndexKeys: 1 << 16, sessions: 1 << 16, heapJobs: 4096, recordRingOps: 1 << 16, pods: 8, scratchSlots: 12, scratchBytes: 1 << 16 });
  const h = new RoutingHost(region, { policy: createPolicy('sticky'), blockSize: 16, sessionTtlMs: 600_000, random: () => 0.5, scheduler });
  for (let i = 0; i < 4; i++) h.addPod({ id: `p${i}`, role: 'both', models: new Set(['m']), state: 'ready' });
  return h;
}

const KEYS = new BigUint64Array(0);
const WAITER: AdmissionWaiter = { released () {}, dropped () {} };
const NONE: ReadonlySet<number> = new Set();

/** µs a request, 1024 sessions in turn. */
function run (h: RoutingHost, viaSubmit: boolean): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const req: HostRequest = { model: 'm', sessionId: `s${i & 1023}`, parentSessionId: null, promptTokens: 100, blockKeys: KEYS, maxTokens: null, user: null };
    let p: Placement;
    if (viaSubmit) {
      p = h.admission.submit(req, WAITER, i) as Placement;
    } else {
      p = h.route(req, NONE, i);
      h.dispatched(p, i);
    }
    h.firstToken(p, i);
    h.finished(p, { promptTokens: 100, completionTokens: 5 }, i + 1);
  }
  return Number(process.hrtime.bigint() - t0) / N / 1000;
}

const rounds = Number(process.argv[2] ?? 7);
const off = host('off');
const atlas = host('atlas');
const deltas: number[] = [];
for (let r = 0; r < rounds; r++) {
  const a = run(off, false);
  const b = run(atlas, true);
  if (r > 0) deltas.push(b - a); // round 0 warms the JIT
  console.log(`round ${r}: route+dispatched ${a.toFixed(2)} µs, submit (atlas, passing through) ${b.toFixed(2)} µs`);
}
deltas.sort((x, y) => x - y);
console.log(`admission in pass-through: median ${deltas[deltas.length >> 1].toFixed(2)} µs a request (min ${deltas[0].toFixed(2)}, max ${deltas[deltas.length - 1].toFixed(2)})`);
