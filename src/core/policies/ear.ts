// ear and ear-proactive: Elastic Affinity Routing (docs/architecture.md#migration, issue 12 item 1).
// - A new session (or a request without one) goes to the candidate with the least pending prefill. Ties: the
//   fewest requests on the pod (the engine's running count or the gateway's in flight, whichever is larger),
//   then a rotation on the host's count of placements, so idle pods share new sessions in turn (pick.ts argmin
//   with leastLoadScore, the score least-load places a request by).
// - A later turn goes to the session's host, unless
//     the host's pending prefill > tHot (tokens)  and  the session has not moved within tCool (seconds);
//   then the target is, among the other candidates that can hold the session's context, the one with the
//   lowest pending prefill, strictly below the host's and by at least minGain tokens. The decision is
//   { pod: target, migrateFrom: host, reason: 'migrate' }, which the router records as a migration
//   (setHost counts it and sets lastMigration = now). No such target: the session stays (migration is
//   opportunistic), with a reason that says why ('hot-cooling', 'hot-no-target').
// - "Can hold the context": the larger of the session's stored context and this prompt, in tokens, fits the
//   pod's free KV = kvCapacityBlocks · blockSize · (1 − kvUsage). Unknown capacity (0) is taken to fit; a
//   usage of 0 (never scraped, or empty) leaves the whole capacity free. The precise prefix index could tell
//   free blocks more exactly, but the view does not carry it; engine metrics are what a policy sees.
// - A session whose host is no longer a candidate (gone, down, draining) is placed as a new session, reason
//   'host-gone', without migrateFrom: its KV cannot be fetched from a pod that is not serving. (The router's
//   setHost still counts any change of host as a migration unless the pod's row was released, which unbinds
//   the session first; that bookkeeping is the router's, not this policy's.)
//
// "Fewest sessions bound" uses a proxy, not a count. An exact per-pod count of bound sessions would have to
// follow every way a binding ends, and one of them is not observable from the main thread: sessions expire
// inside the WASM session table (sessExpire, on a time budget) and the table reports only how many expired,
// not from which hosts. A counter kept beside it would drift with every expiry. The request count on the pod
// (max of engine running and gateway in flight) is exact, already in the load table, and measures what a
// tie-break should spread: the work that will share the pod with the new session's turns. Between pods equal
// on both (idle pods), the placement rotation spreads new sessions in turn: it counts only placements, so the
// turns of bound sessions in between cannot bring it back to the same pod (a rotation on every decision did,
// whenever the turns between two new sessions were a multiple of the pod count).
//
// Ablation knob affinity (default true, the behaviour above). affinity=false is "migration only": cold
// balance + migration, no affinity. Every turn is placed as a new session is (least pending prefill, ties as
// above), and when that pod is not the session's host and the host is still a candidate the decision is
// { pod, migrateFrom: host, reason: 'rebalance' }: the session's KV follows it by transfer instead of the
// session staying with its KV. tHot, tCool and minGain do not apply in that mode (every turn may move, so a
// cool-down would only reintroduce affinity); the host's free-KV check does not either, as for a new session.
// ear-proactive takes the knob too (its route() is ear's); proactiveMoves() ignores it.
//
// ear-proactive routes every request exactly as ear does. Its difference is proactiveMoves() below, a pure
// function that the migration thread (not written yet, issue 12's later items) is to call on a timer with the
// sessions it can enumerate: it picks *idle* sessions (nothing in flight, i.e. in a tool gap) on hot hosts and
// names where each should go, with the same hot, cool-down and target rules, at most maxMovesPerPod per hot
// host per call. A policy's route() is only ever called for a request, so no idle session moves until that
// thread exists and performs the transfer; nothing here pretends otherwise.
//
// KV pressure (issue 31 part 4; knob kvAware, default true; kv-room.ts says what room is). Short of KV,
// affinity alone kept sessions on engines that could no longer hold them: their prefixes were evicted in their
// tool gaps and their turns preempted, and the hot trigger, which watches pending prefill, fired only after.
// With kvAware:
// - a new session (or one whose host is gone) goes to the least loaded of the candidates whose KV room holds
//   what it needs plus kvMargin of the pod's capacity; with none, to the one with most room ('kv-short');
// - a later turn whose host cannot hold it (room there, plus its own retained prefix, below its need) moves,
//   before its turn runs, to the least loaded candidate where it fits with the margin ({ migrateFrom: host,
//   reason 'kv-move' }; no cool-down: staying costs a preemption or an eviction, not a queue); with none it
//   stays ('kv-no-target');
// - a hot host's target must have that room too, and retained prefixes count as taken (a move that would
//   evict another session's retained prefix is not a gain).
// With room everywhere (the stress regime's engines) every rule above is ear's as before.
//
// Short of KV, by cost (knob shortCost, default true; kvPress, default 3; liveShare, default 0.25). The fleet is
// short of KV when both hold: some candidate's KV holds less than kvPress times the largest session context the
// host has seen (ClusterView.maxContextTokens: one session may take a large share of an engine), and the live
// sessions' contexts (ClusterView.liveContextTokens: sessions seen within the host's live window) add up to more
// than liveShare of the candidates' KV (the fleet cannot keep them all once placement piles them up). The
// second condition is why ten long Claude Code sessions on eight engines are not short (they need at most a
// quarter of the fleet's KV), while the agentic lab at 12,000 blocks is within its first 20 s (RESULTS "Short of
// KV"). Short, every request is placed by kv-load's cost (kv-load.ts, Dynamo's: prefill still to
// compute there, queued prefill and KV held), the rules above aside. A turn that leaves its host does so
// without migrateFrom: it is recomputed where it goes, no KV moved (a transfer short of KV waits behind the
// hot source and mostly ended as a recompute anyway). Admission does not route such a decision again for a
// retained prefix (Decision.keepsRetained false). Why: in that regime the tail is queueing, and re-placing
// each turn by cost spreads the sessions that affinity kept piled up. Unknown capacity (0) on any candidate,
// no context seen yet, or a host that tracks no live sessions: not short.
//
// Defaults are provisional until the sweeps of issue 12 (tHot, tCool, minGain, maxMovesPerPod).
import type { ClusterView, Decision, LoadView, PodView, Policy, RequestFeatures } from '../policy.js';
import { argmin, findPod, leastLoadScore, placementRotation, rotation } from './pick.js';
import { bool, int, num, readKnobs } from './knobs.js';
import { kvNeed, kvRoom, ownRetained } from './kv-room.js';
import { createKvLoad } from './kv-load.js';

export const EAR_DEFAULTS = {
  // Pending prefill (tokens) above which a host is hot: by the simulator's profiles' per-token prefill cost
  // (attention term left out), about 1.3 s of queue on h100-llama-3.1-8b and 2.4 s on h20-qwen3-coder.
  // Provisional until issue 12's sweeps.
  tHot: 32768,
  // Seconds a session must stay put after a migration before it may move again (stops ping-pong). Provisional.
  tCool: 60,
  // Tokens of pending prefill a move must save at least (host − target), so a move pays for its transfer.
  // Provisional.
  minGain: 8192,
  // false: the "migration only" ablation (see the header). true is ear as designed.
  affinity: true,
  // false: placement and the move trigger ignore KV room (ear before issue 31), an ablation.
  kvAware: true,
  // Share of a pod's KV left free beyond a session's need for it to fit: metrics are a scrape old, and a turn's
  // output and the next tool result grow the context. Provisional.
  kvMargin: 0.05,
  // Short of KV, place every request by kv-load's cost (see the header); false: ear's rules always.
  shortCost: true,
  // Short of KV needs some pod's KV to hold less than kvPress × the largest session context seen...
  kvPress: 3,
  // ...and the live sessions' contexts to add up to more than liveShare of the candidates' KV. Provisional
  // (RESULTS "Short of KV": ten Claude Code sessions on eight H20s peak at 0.25 and do not read short; the agentic
  // lab at 12,000 blocks passes 0.25 within its first 20 s; at 0.5, reached later, affinity piled sessions up first).
  liveShare: 0.25
};

export type EarConfig = typeof EAR_DEFAULTS;

export const EAR_PROACTIVE_DEFAULTS = {
  ...EAR_DEFAULTS,
  // Idle sessions proactiveMoves() moves off one hot host per call (bounds the transfers a tick starts).
  // Provisional.
  maxMovesPerPod: 2
};

export type EarProactiveConfig = typeof EAR_PROACTIVE_DEFAULTS;

const checks = {
  tHot: num(0), tCool: num(0), minGain: num(0), affinity: bool(), kvAware: bool(), kvMargin: num(0, 1), shortCost: bool(), kvPress: num(0), liveShare: num(0)
};

/**
 * Whether the fleet is short of KV (see the header): some candidate's KV holds less than kvPress × the largest
 * session context seen, and the live sessions' contexts exceed liveShare of the candidates' KV. A candidate of
 * unknown capacity makes the fleet's KV unknown: not short.
 */
export function shortOfKv (cluster: ClusterView, kvPress: number, liveShare: number): boolean {
  const context = cluster.maxContextTokens ?? 0;
  const live = cluster.liveContextTokens ?? 0;
  if (!(context > 0) || !(live > 0)) return false;
  let fleet = 0;
  let tight = false;
  for (const p of cluster.pods) {
    if (!(p.kvCapacityBlocks > 0)) return false;
    const tokens = p.kvCapacityBlocks * p.blockSize;
    fleet += tokens;
    if (tokens < kvPress * context) tight = true;
  }
  return tight && live > liveShare * fleet;
}

/** Free KV of a pod in tokens; +Infinity when its capacity is unknown (then anything is taken to fit). */
export function freeKvTokens (pod: PodView, load: LoadView): number {
  if (!(pod.kvCapacityBlocks > 0)) return Infinity;
  const usage = Math.min(1, Math.max(0, load.kvUsage(pod.index) || 0));
  return pod.kvCapacityBlocks * pod.blockSize * (1 - usage);
}

/**
 * The pod a session on `host` should move to: among candidates other than the host whose free KV (less what
 * `reserved` already promised in this pass) holds `needTokens`, the lowest pending prefill, if it is strictly
 * below the host's and by at least minGain. Ties: fewer requests, then the decision rotation (the migration
 * thread's planner places no new sessions). Null when none qualifies.
 */
export function migrationTarget (
  cluster: ClusterView, host: number, needTokens: number, k: EarConfig, reserved?: ReadonlyMap<number, number>
): PodView | null {
  const { load } = cluster;
  const hostPending = load.pendingPrefill(host);
  const fit: PodView[] = [];
  for (const p of cluster.pods) {
    if (p.index === host) continue;
    const pending = load.pendingPrefill(p.index);
    if (!(pending < hostPending && hostPending - pending >= k.minGain)) continue;
    const free = k.kvAware ? kvRoom(p, cluster) * p.blockSize - k.kvMargin * p.kvCapacityBlocks * p.blockSize : freeKvTokens(p, load);
    if (free - (reserved?.get(p.index) ?? 0) < needTokens) continue;
    fit.push(p);
  }
  if (fit.length === 0) return null;
  return argmin(fit, leastLoadScore(cluster), rotation(cluster));
}

/** The host is hot and the session may move again (ms clock, as the session table keeps it). */
function mayMove (cluster: ClusterView, host: number, lastMigration: number, now: number, k: EarConfig): 'hot' | 'cooling' | 'cold' {
  if (!(cluster.load.pendingPrefill(host) > k.tHot)) return 'cold';
  return now - lastMigration >= k.tCool * 1000 ? 'hot' : 'cooling';
}

/** Whether `need` blocks fit on the pod with the margin, counting `own` retained blocks as the session's. */
function fits (k: EarConfig, cluster: ClusterView, p: PodView, need: number, own = 0): boolean {
  return kvRoom(p, cluster) + own >= need + k.kvMargin * p.kvCapacityBlocks;
}

/** Among the candidates (but `except`) where `need` blocks fit, the least loaded (placement rotation on ties); null if none. */
function leastLoadedFit (k: EarConfig, cluster: ClusterView, needTokens: number, except = -1): PodView | null {
  const fit = cluster.pods.filter((p) => p.index !== except && fits(k, cluster, p, Math.ceil(needTokens / Math.max(1, p.blockSize))));
  return fit.length === 0 ? null : argmin(fit, leastLoadScore(cluster), placementRotation(cluster));
}

/**
 * Short of KV: kv-load's pick, no migrateFrom (a turn that leaves its host is recomputed where it goes), and
 * admission does not route it again to spare a retained prefix (keepsRetained false): the pick already weighed
 * what each pod holds, and short of KV a retained prefix is mostly evicted in its gap anyway.
 */
function routeShort (costPolicy: Policy, req: RequestFeatures, cluster: ClusterView, now: number): Decision {
  const { pod } = costPolicy.route(req, cluster, now);
  let reason = 'short-cost';
  const host = req.sessionKey === null ? -1 : cluster.sessions.get(req.sessionKey)?.host ?? -1;
  if (host >= 0 && findPod(cluster, host)) reason = pod === host ? 'short-cost-host' : 'short-cost-leave';
  return { pod, reason, keepsRetained: false };
}

function routeEar (k: EarConfig, req: RequestFeatures, cluster: ClusterView, now: number): { pod: number; migrateFrom?: number; reason: string } {
  const needTokens = (contextTokens: number): number => Math.max(contextTokens, req.promptTokens) + (req.expectedOutputTokens ?? 0);
  const place = (reason: string, contextTokens = 0): { pod: number; reason: string } => {
    if (k.kvAware) {
      const fit = leastLoadedFit(k, cluster, needTokens(contextTokens));
      if (fit !== null) return { pod: fit.index, reason };
      // No pod has room: the one with most (the least it will evict or preempt).
      return { pod: argmin(cluster.pods, (p) => -kvRoom(p, cluster), placementRotation(cluster)).index, reason: 'kv-short' };
    }
    return { pod: argmin(cluster.pods, leastLoadScore(cluster), placementRotation(cluster)).index, reason };
  };
  if (req.sessionKey === null) return place('no-session');
  const s = cluster.sessions.get(req.sessionKey);
  if (!s || s.host < 0) return place('new-session');
  const host = findPod(cluster, s.host);
  if (!host) return place('host-gone', s.contextTokens);
  if (!k.affinity) {
    const score = leastLoadScore(cluster);
    const best = argmin(cluster.pods, score, placementRotation(cluster));
    // A host tied with the least loaded stays: moving between equals would cost a transfer for nothing.
    if (best.index === s.host || score(findPod(cluster, s.host)!) <= score(best)) return { pod: s.host, reason: 'host-least-load' };
    return { pod: best.index, migrateFrom: s.host, reason: 'rebalance' };
  }
  if (k.kvAware && !fits(k, cluster, host, kvNeed(req, s.contextTokens, host.blockSize), ownRetained(cluster, req.sessionKey, s.host) + k.kvMargin * host.kvCapacityBlocks)) {
    // The host cannot hold the session (the margin is only asked of a target): move it before its turn runs there.
    const target = leastLoadedFit(k, cluster, needTokens(s.contextTokens), s.host);
    if (target === null) return { pod: s.host, reason: 'kv-no-target' };
    return { pod: target.index, migrateFrom: s.host, reason: 'kv-move' };
  }
  const state = mayMove(cluster, s.host, s.lastMigration, now, k);
  if (state === 'cold') return { pod: s.host, reason: 'session-host' };
  if (state === 'cooling') return { pod: s.host, reason: 'hot-cooling' };
  const target = migrationTarget(cluster, s.host, Math.max(s.contextTokens, req.promptTokens), k);
  if (target === null) return { pod: s.host, reason: 'hot-no-target' };
  return { pod: target.index, migrateFrom: s.host, reason: 'migrate' };
}

/** ear's route(): short of KV (shortCost), kv-load's pick; otherwise routeEar. */
function earRoute (k: EarConfig): Policy['route'] {
  const costPolicy = createKvLoad();
  return (req, cluster, now) => (k.shortCost && shortOfKv(cluster, k.kvPress, k.liveShare) ? routeShort(costPolicy, req, cluster, now) : routeEar(k, req, cluster, now));
}

export function createEar (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('ear', config, EAR_DEFAULTS, checks);
  return { name: 'ear', keepsRetained: k.kvAware, route: earRoute(k) };
}

/** Reads ear-proactive's knobs (ear's and maxMovesPerPod), for the policy and for the migration thread. */
export function readEarProactiveKnobs (config: Readonly<Record<string, unknown>> = {}): EarProactiveConfig {
  return readKnobs('ear-proactive', config, EAR_PROACTIVE_DEFAULTS, { ...checks, maxMovesPerPod: int(1) });
}

/** Routes requests exactly as ear; its idle-session moves are proactiveMoves(), called by the migration thread. */
export function createEarProactive (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readEarProactiveKnobs(config);
  return { name: 'ear-proactive', keepsRetained: k.kvAware, route: earRoute(k) };
}

/** A session as the migration thread enumerates it (the session table's fields). */
export interface IdleCandidate {
  readonly key: bigint;
  /** Pod index of the host, −1 for none. */
  readonly host: number;
  readonly contextTokens: number;
  /** ms, −Infinity if never moved. */
  readonly lastMigration: number;
  readonly inFlight: number;
}

export interface ProactiveMove {
  readonly sessionKey: bigint;
  readonly from: number;
  readonly to: number;
}

/**
 * The idle sessions to move off hot hosts now, pure: sessions with nothing in flight, bound to a candidate
 * whose pending prefill > tHot, that have not moved within tCool, with a target by migrationTarget (their
 * stored context must fit). At most maxMovesPerPod per hot host; the smallest contexts first (the cheapest
 * transfers, and the likeliest to fit), ties in the order given. KV promised to a target by an earlier move in
 * the same call counts as used. Pending prefill is not adjusted between moves: an idle session has none.
 * The caller performs each move (transfer, then rebind with a compare-and-set) and may drop any.
 */
export function proactiveMoves (
  sessions: Iterable<IdleCandidate>, cluster: ClusterView, now: number, k: EarProactiveConfig
): ProactiveMove[] {
  const byHost = new Map<number, IdleCandidate[]>();
  for (const s of sessions) {
    if (s.inFlight !== 0 || s.host < 0) continue;
    let list = byHost.get(s.host);
    if (list === undefined) {
      if (!findPod(cluster, s.host) || mayMove(cluster, s.host, -Infinity, now, k) !== 'hot') continue;
      byHost.set(s.host, list = []);
    }
    if (now - s.lastMigration < k.tCool * 1000) continue;
    list.push(s);
  }
  const moves: ProactiveMove[] = [];
  const reserved = new Map<number, number>();
  // Hottest host first, so when targets' KV runs short the worst queue is relieved first.
  const hosts = [...byHost.keys()].sort((a, b) => cluster.load.pendingPrefill(b) - cluster.load.pendingPrefill(a) || a - b);
  for (const host of hosts) {
    const list = byHost.get(host)!.slice().sort((a, b) => a.contextTokens - b.contextTokens);
    let moved = 0;
    for (const s of list) {
      if (moved >= k.maxMovesPerPod) break;
      const target = migrationTarget(cluster, host, s.contextTokens, k, reserved);
      // Gain is the same for every session of this host and contexts ascend: if this one has no target, none after it has.
      if (target === null) break;
      reserved.set(target.index, (reserved.get(target.index) ?? 0) + s.contextTokens);
      moves.push({ sessionKey: s.key, from: host, to: target.index });
      moved++;
    }
  }
  return moves;
}
