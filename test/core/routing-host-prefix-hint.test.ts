import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { RingConsumer } from '../../src/core/ring.js';
import { RoutingHost, type HostRequest } from '../../src/core/routing-host.js';
import { createPolicy } from '../../src/core/policies/index.js';
import { IndexFeeder } from '../../src/kvevents/index-feeder.js';

// A session's turn costs what is new in its prompt: its walk of the index starts from what its pod was found
// holding last turn (while that pod lost nothing), and only the blocks the pod does not hold are recorded, with
// every key recorded again once a quarter of the assumed TTL has passed.
const MODEL = 'm';
const TTL = 60_000;

function setup () {
  const region = createAndAttach({ prefixIndexKeys: 1 << 12, sessions: 256, heapJobs: 16, recordRingOps: 4096, pods: 8, scratchSlots: 12, scratchBytes: 1 << 16 });
  const host = new RoutingHost(region, { policy: createPolicy('ear'), blockSize: 16, sessionTtlMs: 600_000, random: () => 0.5 });
  const models = new Set([MODEL]);
  for (let i = 0; i < 3; i++) host.addPod({ id: `p${i}`, role: 'both', models, state: 'ready' });
  const writer = new PrefixIndexWriter(region);
  const feeder = new IndexFeeder(writer, new RingConsumer(region), { assumedTtlMs: TTL, expiryBudget: 16 });
  feeder.expire(0); // the writer publishes its TTL with its first sweep, as the kv-events thread does at start
  const hasher = new BlockHasher(region);
  /** Keys of a prompt of `n` tokens; `ending` other than 0 changes the tokens of its last block (a generation prompt). */
  const keysOf = (n: number, ending = 0): BigUint64Array => {
    const tokens = Array.from({ length: n }, (_, i) => (i * 7919 + (i >= n - 16 ? ending : 0)) % 50_000);
    const span = hasher.hash(tokens, 16, hasher.rootSeed(MODEL));
    return new BigUint64Array(region.memory.buffer, span.ptr, span.count).slice();
  };
  /** One turn of session `s` with the prompt's first `blocks` blocks: routed, dispatched, ended; its ring ops applied. */
  const turn = (s: string, blocks: number, now: number, keys = keysOf(blocks * 16).subarray(0, blocks)) => {
    const r: HostRequest = { model: MODEL, sessionId: s, parentSessionId: null, promptTokens: blocks * 16, blockKeys: keys, maxTokens: null, user: null };
    const p = host.route(r, new Set(), now);
    host.dispatched(p, now);
    host.finished(p, { promptTokens: blocks * 16, completionTokens: 1 }, now + 1);
    const recorded = feeder.pump();
    return { pod: p.pod, matched: p.matchedBlocks, recorded, keys };
  };
  return { host, writer, feeder, turn, keysOf };
}

test('a session\'s turns: the walk starts from the blocks its pod held last turn, and only new blocks are recorded', () => {
  const { host, turn } = setup();
  const t1 = turn('s', 100, 1000);
  assert.equal(t1.recorded, 100, 'the first turn records its whole prompt');
  const t2 = turn('s', 120, 2000);
  assert.equal(t2.pod, t1.pod, 'the session stays on its host');
  assert.equal(t2.matched, 100);
  assert.equal(t2.recorded, 20, 'the second turn records only its 20 new blocks');
  const t3 = turn('s', 140, 3000);
  assert.equal(t3.matched, 120);
  assert.equal(t3.recorded, 20);
  assert.equal(host.prefixOf(t3.keys, t3.pod).assumed, 140, 'the index holds the whole prompt on the pod');
  const w = host.walkStats();
  assert.equal(w.full, 2, 'turns 1 and 2 walk the whole prompt (turn 2 had no count from a walk yet)');
  assert.equal(w.shortcut, 1, 'turn 3 starts from the 100 blocks turn 2 found');
  assert.equal(w.fullRecords, 1);
  assert.equal(w.recordedKeys, 140);
});

test('a prompt its pod holds whole (a retry): the hint stops a block short, so the next turn, whose last block differs, still starts from it', () => {
  const { host, turn, keysOf } = setup();
  const prompt = keysOf(100 * 16, 1);
  const first = turn('s', 100, 1000, prompt);
  const retry = turn('s', 100, 2000, prompt);
  assert.equal(retry.pod, first.pod);
  assert.equal(retry.matched, 100, 'the first try recorded the whole prompt');
  // The next turn: the first 99 blocks, then the reply where the generation prompt was, then new blocks.
  const next = keysOf(120 * 16);
  assert.deepEqual([...next.subarray(0, 99)], [...prompt.subarray(0, 99)]);
  assert.notEqual(next[99], prompt[99]);
  const before = host.walkStats().shortcut;
  const t = turn('s', 120, 3000, next);
  assert.equal(host.walkStats().shortcut, before + 1, 'the walk starts from block 99');
  assert.equal(t.matched, 99, 'as the whole walk says');
  assert.equal(t.recorded, 21);
});

test('a block lost in the middle of the prefix (an engine removed it): the next walk starts from the hole and finds it', () => {
  const { host, writer, turn } = setup();
  turn('s', 100, 1000);
  const t2 = turn('s', 120, 2000);
  writer.remove(t2.keys[50], t2.pod, writer.mask.all);
  const before = host.walkStats();
  const t3 = turn('s', 140, 3000);
  const after = host.walkStats();
  assert.equal(after.shortcut, before.shortcut + 1, 'the pod\'s loss ring names the block: the walk starts from block 50');
  assert.equal(after.shortcutAfterLoss, before.shortcutAfterLoss + 1);
  assert.equal(after.full, before.full);
  assert.equal(t3.matched, 50, 'matched up to the hole, as the whole walk says');
  assert.equal(t3.recorded, 90, 'and from the hole on, the blocks are recorded again');
  const t4 = turn('s', 150, 4000);
  assert.equal(t4.matched, 140, 'the hole is filled');
});

test('a block evicted by CLOCK at the index\'s bound: the next walk starts from the first evicted block', () => {
  const { host, writer, turn } = setup();
  turn('s', 100, 1000);
  const t2 = turn('s', 120, 2000);
  // Another pod's blocks, a full index's worth: CLOCK evicts, the session's blocks among others.
  const other = (t2.pod + 1) % 3;
  const cap = writer.stats().capacity;
  for (let i = 0; i < cap; i++) writer.insert(BigInt(1_000_000 + i), other, writer.kind.assumed, 2500);
  const lost = t2.keys.findIndex((k) => writer.lookup(k) === null);
  assert.ok(lost >= 0 && lost < 120, 'a block of the session was evicted');
  const before = host.walkStats().shortcutAfterLoss;
  const t3 = turn('s', 140, 3000);
  assert.equal(host.walkStats().shortcutAfterLoss, before + (lost > 0 ? 1 : 0), 'from the first evicted block (a whole walk if it was block 0)');
  assert.equal(t3.matched, lost, 'matched up to the first evicted block, as the whole walk says');
});

test('the pod lost other sessions\' blocks (an index at its capacity evicts with every insert): the walk still starts from the hint', () => {
  const { host, writer, turn } = setup();
  turn('s', 100, 1000);
  const t2 = turn('s', 120, 2000);
  // Another session's blocks on the same pod, then lost (evicted, removed, expired: one loss each).
  const other = Array.from({ length: 30 }, (_, i) => BigInt(9_000_000 + i));
  for (const k of other) writer.insert(k, t2.pod, writer.kind.assumed, 2500);
  for (const k of other) writer.remove(k, t2.pod, writer.mask.all);
  const before = host.walkStats();
  const t3 = turn('s', 140, 3000);
  const after = host.walkStats();
  assert.equal(after.shortcut, before.shortcut + 1, 'none of the 30 lost blocks is this prompt\'s');
  assert.equal(after.shortcutAfterLoss, before.shortcutAfterLoss + 1);
  assert.equal(t3.matched, 120);
  assert.equal(t3.recorded, 20);
});

test('a turn a TTL after its session\'s last full record walks whole: blocks past the TTL, not yet swept, do not count', () => {
  const { host, turn } = setup();
  turn('s', 100, 1000);
  turn('s', 120, 2000);
  const before = host.walkStats();
  // No sweep since: blocks 0..99 (recorded at 1000) are past the TTL at 61,010, though still in the index.
  const t3 = turn('s', 140, 1000 + TTL + 10);
  const after = host.walkStats();
  assert.equal(after.shortcut, before.shortcut, 'the hint does not vouch past its records\' TTL');
  assert.equal(after.full, before.full + 1);
  assert.equal(t3.matched, 0, 'block 0 has expired: nothing matches, as the whole walk with the TTL says');
  assert.equal(t3.recorded, 140);
});

test('the pod\'s row purged (its backend left and came back on the row): the walk is whole, the prompt recorded whole', () => {
  const { host, writer, turn } = setup();
  turn('s', 100, 1000);
  const t2 = turn('s', 120, 2000);
  writer.clearPods([t2.pod], writer.mask.all);
  const before = host.walkStats().shortcut;
  const t3 = turn('s', 140, 3000);
  assert.equal(host.walkStats().shortcut, before);
  assert.equal(t3.matched, 0);
  assert.equal(t3.recorded, 140, 'nothing held: every block recorded');
});

test('every key is recorded again once the last full record is a quarter TTL old, so a live session\'s blocks never expire', () => {
  const { host, feeder, turn } = setup();
  turn('s', 100, 1000);
  assert.equal(turn('s', 110, 1000 + TTL / 8).recorded, 10);
  const t = turn('s', 120, 1000 + TTL / 4);
  assert.equal(t.recorded, 120, 'a quarter TTL after the first: all of it');
  assert.equal(turn('s', 130, 1000 + TTL / 4 + 10).recorded, 10);
  // Sweep the index at a time when the first record's entries would have expired without the refresh.
  for (let i = 0; i < 400; i++) feeder.expire(1000 + TTL + TTL / 8);
  const t5 = turn('s', 140, 1000 + TTL + TTL / 8);
  assert.equal(t5.matched, 130, 'nothing of the session expired');
  assert.ok(host.walkStats().fullRecords >= 2);
});

test('without a TTL from the writer (no sweep yet), or without a session, every key is recorded each time', () => {
  const region = createAndAttach({ prefixIndexKeys: 1 << 12, sessions: 256, heapJobs: 16, recordRingOps: 4096, pods: 8, scratchSlots: 12, scratchBytes: 1 << 16 });
  const host = new RoutingHost(region, { policy: createPolicy('ear'), blockSize: 16, sessionTtlMs: 600_000, random: () => 0.5 });
  host.addPod({ id: 'p0', role: 'both', models: new Set([MODEL]), state: 'ready' });
  const feeder = new IndexFeeder(new PrefixIndexWriter(region), new RingConsumer(region), { assumedTtlMs: TTL, expiryBudget: 16 });
  const keys = new BigUint64Array(Array.from({ length: 30 }, (_, i) => BigInt(i + 1)));
  const go = (s: string | null, now: number): number => {
    const p = host.route({ model: MODEL, sessionId: s, parentSessionId: null, promptTokens: 480, blockKeys: keys, maxTokens: null, user: null }, new Set(), now);
    host.dispatched(p, now);
    return feeder.pump();
  };
  assert.equal(go('s', 1), 30);
  assert.equal(go('s', 2), 30, 'no TTL known: whole');
  feeder.expire(3);
  assert.equal(go(null, 4), 30, 'no session: whole');
  go('s', 5);
  assert.equal(go('s', 6), 0, 'a session with a TTL known: only what is new (nothing)');
});

test('a moved session: its old host holds its prefix too, and its turns are counted on both as by the whole walk', () => {
  const { host, turn } = setup();
  const t1 = turn('s', 100, 1000);
  turn('s', 110, 2000);
  const A = t1.pod;
  const B = (A + 1) % 3;
  assert.ok(host.rebindIdle(host.sessionKey('s'), A, B, 2500), 'moved to B');
  const t3 = turn('s', 120, 3000);
  assert.equal(t3.pod, B);
  assert.equal(t3.matched, 0);
  assert.equal(t3.recorded, 120, 'the new host records the whole prompt');
  // The next turns find both pods holding the prefix: the hint names the host and, second, the old host.
  const t4 = turn('s', 130, 4000);
  const before = host.walkStats();
  const t5 = turn('s', 140, 5000);
  const t6 = turn('s', 150, 6000);
  const after = host.walkStats();
  assert.deepEqual([t4.pod, t5.pod, t6.pod], [B, B, B]);
  assert.deepEqual([t4.matched, t5.matched, t6.matched], [120, 130, 140]);
  assert.deepEqual([t4.recorded, t5.recorded, t6.recorded], [10, 10, 10]);
  assert.equal(after.shortcut - before.shortcut, 2);
  assert.equal(after.secondHint - before.secondHint, 2, 'told of the old host\'s blocks too');
  assert.equal(after.full, before.full);
  assert.equal(host.prefixOf(t6.keys, A, 6000).assumed, 110, 'the old host still holds what it was recorded with');
  assert.equal(host.prefixOf(t6.keys, B, 6000).assumed, 150);
});

/** A session moved from A to B (which recorded its whole prompt at 3000), then B and C gone: its turn can only go to A. */
function movedAway () {
  const s = setup();
  const t1 = s.turn('s', 100, 1000);
  s.turn('s', 110, 2000);
  const A = t1.pod;
  const B = (A + 1) % 3;
  const C = (A + 2) % 3;
  s.host.rebindIdle(s.host.sessionKey('s'), A, B, 2500);
  s.turn('s', 120, 3000);
  s.turn('s', 130, 4000);
  s.turn('s', 140, 5000);
  const models = new Set([MODEL]);
  s.host.setPod(B, { id: `p${B}`, role: 'both', models, state: 'down' });
  s.host.setPod(C, { id: `p${C}`, role: 'both', models, state: 'down' });
  return { ...s, A };
}

test('a moved session\'s old host is vouched for until a TTL after its last full record there; the walk then looks, and counts what lives', () => {
  // A's blocks 0..109 were recorded there at 1000 and 2000, and on B at 3000, which set their one assumed time too;
  // no sweep since, so they are still in the index.
  let m = movedAway();
  let before = m.host.walkStats().secondHint;
  let t = m.turn('s', 150, 1000 + TTL / 2);
  assert.equal(t.pod, m.A);
  assert.equal(t.matched, 110);
  assert.equal(m.host.walkStats().secondHint, before + 1, 'within a TTL of A\'s record: A is vouched for');
  // A TTL after A's own record the hint no longer stands for A; B's record keeps the blocks alive, and the walk finds them.
  m = movedAway();
  before = m.host.walkStats().secondHint;
  t = m.turn('s', 150, 1000 + TTL + 500);
  assert.equal(t.matched, 110);
  assert.equal(m.host.walkStats().secondHint, before, 'past it: A is looked up');
  // Past a TTL after B's record too, they have expired: nothing matches on A.
  m = movedAway();
  t = m.turn('s', 150, 3000 + TTL + 500);
  assert.equal(t.pod, m.A);
  assert.equal(t.matched, 0, 'block 0 has expired on A: nothing matches there, as the whole walk with the TTL says');
});

test('a moved session\'s old host that lost a block since: counted to the hole, as the whole walk counts it', () => {
  const m = movedAway();
  const keys = m.keysOf(150 * 16).subarray(0, 150);
  m.writer.remove(keys[50], m.A, m.writer.mask.all); // A's engine dropped block 50
  const before = m.host.walkStats().secondHint;
  const t = m.turn('s', 150, 6000, keys);
  assert.equal(t.pod, m.A);
  assert.equal(m.host.walkStats().secondHint, before + 1, 'vouched for as far as its loss ring says');
  assert.equal(t.matched, 50);
});

test('a pod the session never recorded on is not vouched for as a second pod: another session\'s blocks there are looked up', () => {
  // Session `twin` puts a text on X at 1000; session `s` shares its first 99 blocks, recorded on P at 2000, and P's
  // engine then reports the text's 130 blocks confirmed: `s`'s next turn matches 120 there and records nothing. The
  // hint's second pod is X, where `s` never recorded: blocks 99..109, assumed at 1000, are past the TTL at 61,030.
  const { host, writer, turn, keysOf } = setup();
  const C = keysOf(130 * 16);
  const X = turn('twin', 110, 1000, C.subarray(0, 110)).pod;
  const own = keysOf(100 * 16, 1);
  const P = turn('s', 100, 2000, own).pod;
  assert.notEqual(P, X);
  for (let i = 0; i < 130; i++) writer.insert(C[i], P, writer.kind.confirmed, 2500);
  assert.equal(turn('s', 120, 3000, C.subarray(0, 120)).pod, P);
  const models = new Set([MODEL]);
  const Z = 3 - X - P;
  host.setPod(P, { id: `p${P}`, role: 'both', models, state: 'down' });
  host.setPod(Z, { id: `p${Z}`, role: 'both', models, state: 'down' });
  const whole = host.prefixOf(C.subarray(0, 125), X, 61_030).assumed;
  assert.equal(whole, 99, 'the whole walk: blocks 0..98, re-recorded on P at 2000, live; 99..109 have expired');
  const t = turn('s', 125, 61_030, C.subarray(0, 125));
  assert.equal(t.pod, X);
  assert.equal(t.matched, whole);
});
