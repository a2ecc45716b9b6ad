import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { expandBlock, expandBlocks, PromptSource, SessionPrompt, TOKEN_MIN, TOKEN_SPAN } from '../../../src/eval/workloads/prompt-builder.js';

const spec = (keepBlocks: number, newBlocks: number[], promptTokens: number) => ({ keepBlocks, newBlocks: Uint32Array.from(newBlocks), promptTokens });

test('a block expands to the same ids for the same (seed, block), different ones otherwise, inside the token range', () => {
  const a: number[] = [], b: number[] = [], c: number[] = [], d: number[] = [];
  expandBlock(7, 42, 64, a, 0); expandBlock(7, 42, 64, b, 0); expandBlock(7, 43, 64, c, 0); expandBlock(8, 42, 64, d, 0);
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  assert.notDeepEqual(a, d);
  for (const x of [...a, ...c, ...d]) assert.ok(Number.isInteger(x) && x >= TOKEN_MIN && x < TOKEN_MIN + TOKEN_SPAN);
  assert.ok(new Set(a).size > 50, 'ids within a block look random');
});

test('a cut block is the prefix of the whole block', () => {
  assert.deepEqual(expandBlocks(1, [5, 9], 16, 20), Uint32Array.from([...expandBlocks(1, [5], 16, 16), ...expandBlocks(1, [9], 16, 16).slice(0, 4)]));
  assert.throws(() => expandBlocks(1, [5], 16, 17), /needs more than 1 blocks/);
});

test('advancing a session equals expanding each prompt from scratch (kept blocks, cut blocks kept or not)', () => {
  fc.assert(fc.property(
    fc.array(fc.record({ keep: fc.nat(6), add: fc.array(fc.nat(50), { maxLength: 4 }), cut: fc.nat(7) }), { minLength: 1, maxLength: 8 }),
    (steps) => {
      const bs = 8;
      const p = new SessionPrompt(3, bs);
      let blocks: number[] = [];
      for (const s of steps) {
        const keep = Math.min(s.keep, blocks.length);
        const next = [...blocks.slice(0, keep), ...s.add];
        if (next.length === 0) continue;
        const tokens = (next.length - 1) * bs + 1 + (s.cut % bs);
        const got = p.advance(spec(keep, s.add, tokens));
        assert.deepEqual(got.blocks, next);
        assert.deepEqual(got.tokens, expandBlocks(3, next, bs, tokens));
        blocks = next;
      }
    }), { numRuns: 200 });
});

test('advance refuses a spec that does not fit', () => {
  const p = new SessionPrompt(1, 4);
  assert.throws(() => p.advance(spec(1, [1], 4)), /keepBlocks 1 > previous/);
  assert.throws(() => p.advance(spec(0, [1], 5)), /exceeds its 1 blocks/);
});

test('PromptSource serves turns in order per session and drops a session after its last turn', () => {
  const src = new PromptSource({ seed: 2, blockSize: 4 });
  const a = { id: 'a', turns: [spec(0, [1, 2], 7), spec(1, [3], 8)] };
  const b = { id: 'b', turns: [spec(0, [1], 4)] };
  assert.deepEqual(src.turn(a, 0).tokens, expandBlocks(2, [1, 2], 4, 7));
  assert.throws(() => src.turn(a, 0), /turn 0 asked for, expected turn 1/);
  assert.equal(src.turn(b, 0).tokens.length, 4);
  assert.equal(src.live, 1, 'b had one turn: dropped');
  assert.deepEqual(src.turn(a, 1).blocks, [1, 3]);
  assert.equal(src.live, 0);
  const r = { sessionId: 'm1', turn: 0, final: true, ...spec(0, [5], 3) };
  assert.deepEqual(src.request(r).tokens, expandBlocks(2, [5], 4, 3));
  assert.equal(src.live, 0);
  assert.throws(() => src.turn(a, 5), /no turn 5/);
});
