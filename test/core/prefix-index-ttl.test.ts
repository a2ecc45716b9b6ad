// Assumed presence must not outlive the writer's TTL (issue 28 #9). The expiry sweep takes a slice of the table
// per tick (a table of 2^20 keys once in ~51 s, ten times precise mode's 5 s TTL), so the TTL is applied where the
// presence is read (a walk or lookup given a time) and where an assumed insert refreshes an entry's one time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach } from '../../src/core/region.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';

const region = createAndAttach({ prefixIndexKeys: 1 << 16, scratchSlots: 4, scratchBytes: 1 << 16 });
const area = region.claimScratch();
const keysPtr = area.ptr + 4096;
const TTL = 5000;
const BLOCKS = 256; // a 4,096-token prefix in blocks of 16
const A = 0;
const B = 1;

/** `rows` pod rows: 256 is one pod group (the walk's one-group path), 600 three (the generic path). */
function freshIndex (rows = 256): PrefixIndexWriter {
  const base = region.base('TABLE_PREFIX_INDEX');
  const bytes = region.fn<(c: number, pods: number) => number>('ixBytes')(1 << 12, rows) >>> 0;
  region.u8.fill(0, base, base + bytes);
  region.fn<(b: number, c: number, pods: number) => void>('ixInit')(base, 1 << 12, rows);
  return new PrefixIndexWriter(region, { ptr: area.ptr, bytes: 4096 });
}

const prefix = Array.from({ length: BLOCKS }, (_, i) => (BigInt(i + 1) * 0x9E3779B97F4A7C15n) % (1n << 64n));

function span (keys: bigint[]): { ptr: number; count: number } {
  region.u64.set(keys, keysPtr >>> 3);
  return { ptr: keysPtr, count: keys.length };
}

for (const [rows, A, B] of [[256, 0, 1], [600, 0, 300]]) test(`a walk given a time does not count assumed presence past the TTL, though the expiry sweep has not reached it (${rows} pod rows)`, () => {
  const ix = freshIndex(rows);
  const t0 = 1_000_000;
  // The writer's first tick: its sweep publishes the TTL (budget 0 here: the sweep reaches no entry at all).
  ix.expireAssumed(t0, TTL, 0);
  ix.insertMany(span(prefix), B, ix.kind.assumed, t0); // a session with the prefix routed to b
  ix.insertMany(span(prefix.slice(0, 8)), B, ix.kind.confirmed, t0); // b's engine confirmed its first 8 blocks
  const later = t0 + TTL + 1000;
  ix.insertMany(span(prefix), A, ix.kind.confirmed, later); // a stores the prefix 6 s later
  // Within the TTL b's assumed presence counts.
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.all, t0 + TTL - 1), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, BLOCKS]);
  // Past it, only what b's engine confirmed: the row holding both kinds keeps the confirmed bit.
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.all, later + 500), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 8]);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, later + 500), 0);
  assert.deepEqual(ix.lookup(prefix[100], ix.mask.all, later + 500), [A]);
  assert.deepEqual(ix.lookup(prefix[0], ix.mask.all, later + 500), [A, B]);
  // A hinted walk looks up the blocks past the hint with the TTL applied.
  assert.equal(ix.longestPrefixFrom(span(prefix), ix.mask.all, B, 4, later + 500), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 8]);
  // A reader's clock a little behind the writer's reads the presence as young, not 49 days old.
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 - 3), BLOCKS);
  // Without a time the walk reports the bits as they are: the sweep has not cleared them yet.
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed), BLOCKS);
  assert.equal(ix.counts[B], BLOCKS);
  // Once the sweep reaches them they go for good.
  ix.expireAssumed(later + 500, TTL, ix.stats().slots);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed), 0);
});

test('an assumed insert by another pod does not bring back a pod whose assumed presence expired', () => {
  const ix = freshIndex();
  const t0 = 2_000_000;
  ix.expireAssumed(t0, TTL, 0);
  ix.insertMany(span(prefix), B, ix.kind.assumed, t0);
  const epochB = ix.lossEpoch(B);
  // 6 s later a request with the same prefix is routed to a: the entries' one assumed-at time is refreshed.
  const later = t0 + TTL + 1000;
  ix.insertMany(span(prefix), A, ix.kind.assumed, later);
  // b's bits expired before the refresh: they went with it, and b's loss epoch moved (a hinted walk stops trusting b).
  for (const k of [prefix[0], prefix[BLOCKS - 1]]) assert.deepEqual(ix.lookup(k, ix.mask.assumed), [A]);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, later + 500), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 0]);
  assert.notEqual(ix.lossEpoch(B), epochB);
  // Within the TTL a refresh by another pod keeps both.
  ix.insertMany(span(prefix), B, ix.kind.assumed, later + 1000);
  ix.insertMany(span(prefix), A, ix.kind.assumed, later + 2000);
  assert.deepEqual(ix.lookup(prefix[7], ix.mask.assumed, later + 2000), [A, B]);
  assert.equal(ix.probeStats().junk, 0);
});

test('a voided pod (its engine cleared its cache) stops counting its assumed presence at once, with no sweep', () => {
  const ix = freshIndex();
  const t0 = 3_000_000;
  ix.expireAssumed(t0, TTL, 0);
  ix.insertMany(span(prefix), B, ix.kind.assumed, t0);
  ix.insertMany(span(prefix), A, ix.kind.assumed, t0 + 10);
  const epochB = ix.lossEpoch(B);
  ix.voidAssumed(B, t0 + 100);
  assert.notEqual(ix.lossEpoch(B), epochB, 'a hinted walk stops trusting b');
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.all, t0 + 101), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 0]);
  assert.deepEqual(ix.lookup(prefix[9], ix.mask.assumed, t0 + 101), [A]);
  // a's refresh after the void does not bring b's old bits back (the entries' one time moves past the void)
  ix.insertMany(span(prefix.slice(0, 16)), A, ix.kind.assumed, t0 + 200);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 201), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 0]);
  // What is routed to b after its clear counts.
  ix.insertMany(span(prefix.slice(0, 32)), B, ix.kind.assumed, t0 + 300);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 301), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 32]);
  // Once the void is a TTL old readers stop checking it: every bit it voided has expired by then (blocks 32 on,
  // last recorded at t0 + 10), and what was recorded after it has not.
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 100 + TTL), 32);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [32, 32]);
  assert.equal(ix.probeStats().junk, 0);
});

test('a re-record of what an entry holds writes nothing within TTL/64 of its time; past that, or after a void, the time moves', () => {
  const ix = freshIndex();
  const t0 = 4_000_000;
  ix.expireAssumed(t0, TTL, 0); // TTL/64 = 78 ms
  ix.insertMany(span(prefix), A, ix.kind.assumed, t0);
  // A session's next turn re-records its prompt 50 ms later: the entries keep t0.
  assert.equal(ix.insertMany(span(prefix), A, ix.kind.assumed, t0 + 50), 0);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + TTL - 1), BLOCKS);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + TTL), 0, 'the presence still ends a TTL after t0');
  // 100 ms after t0 the re-record moves the time.
  ix.insertMany(span(prefix), A, ix.kind.assumed, t0 + 100);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 100 + TTL - 1), BLOCKS);
  // Another pod's first record of the same blocks is a change: it counts at once.
  ix.insertMany(span(prefix.slice(0, 16)), B, ix.kind.assumed, t0 + 110);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 111), BLOCKS);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [BLOCKS, 16]);
  // a's engine cleared its cache at t0 + 120: a re-record 10 ms after the entries' time still counts.
  ix.voidAssumed(A, t0 + 120);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 121), 16);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [0, 16]);
  ix.insertMany(span(prefix.slice(0, 32)), A, ix.kind.assumed, t0 + 130);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.assumed, t0 + 131), 32);
  assert.deepEqual([ix.counts[A], ix.counts[B]], [32, 16]);
  // Confirmed presence has no time: a re-record of it changes nothing either, and it stays.
  ix.insertMany(span(prefix), B, ix.kind.confirmed, t0 + 140);
  assert.equal(ix.insertMany(span(prefix), B, ix.kind.confirmed, t0 + 150), 0);
  assert.equal(ix.longestPrefix(span(prefix), ix.mask.confirmed, t0 + 10 * TTL), BLOCKS);
  assert.equal(ix.probeStats().junk, 0);
});

test('the expiry sweep steps over a span of slots that never held a key as one step, so a sparse table\'s lap costs its keys, not its slots', () => {
  const ix = freshIndex();
  const slots = ix.stats().slots;
  const t0 = 5_000_000;
  ix.expireAssumed(t0, TTL, 0);
  ix.insertMany(span(prefix.slice(0, 20)), A, ix.kind.assumed, t0);
  // 8,192 slots: 256 spans of 32. The 20 keys lie in at most 20 spans: a lap is at most 236 + 20 × 32 = 876 steps.
  assert.equal(slots, 8192);
  assert.equal(ix.expireAssumed(t0 + TTL + 1, TTL, 1024), 20, 'one call of 1,024 steps reached every key');
  assert.equal(ix.stats().size, 0);
  assert.equal(ix.longestPrefix(span(prefix.slice(0, 20)), ix.mask.all), 0);
  assert.equal(ix.probeStats().junk, 0, 'every key lies in a span marked used');
});
