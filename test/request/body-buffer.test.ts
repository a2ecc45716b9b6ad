import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { bodyBuffer, joinBody, SHARED_BODY_MIN_BYTES } from '../../src/request/body-buffer.js';
import { decodeBody } from '../../src/request/body-encoding.js';

test('a body from SHARED_BODY_MIN_BYTES on lives in shared memory, a smaller one in its own buffer', () => {
  const small = bodyBuffer(SHARED_BODY_MIN_BYTES - 1);
  assert.equal(small.length, SHARED_BODY_MIN_BYTES - 1);
  assert.ok(small.buffer instanceof ArrayBuffer);
  assert.equal(small.buffer.byteLength, SHARED_BODY_MIN_BYTES - 1, 'not a slice of Node\'s pool');
  const big = bodyBuffer(SHARED_BODY_MIN_BYTES);
  assert.ok(big.buffer instanceof SharedArrayBuffer);
  assert.equal(big.length, SHARED_BODY_MIN_BYTES);
});

test('joinBody copies the chunks in order; the shared one reaches a thread as the same memory, not a copy', async () => {
  const chunks = [Buffer.from('{"model":"m",'), Buffer.alloc(SHARED_BODY_MIN_BYTES, 'x'), Buffer.from('"end":1}')];
  const size = chunks.reduce((n, c) => n + c.length, 0);
  const body = joinBody(chunks, size);
  assert.deepEqual(body, Buffer.concat(chunks));
  assert.ok(body.buffer instanceof SharedArrayBuffer);
  assert.equal(joinBody([Buffer.from('ab'), Buffer.from('c')], 3).toString(), 'abc');
  // The thread writes into what it was posted: the write shows here, so the post shared it (a clone would not).
  const w = new Worker('require("node:worker_threads").parentPort.once("message", (b) => { b[0] = 0x5b; require("node:worker_threads").parentPort.postMessage(b.length) })', { eval: true });
  try {
    w.postMessage(body);
    assert.equal(await new Promise((resolve) => w.once('message', resolve)), size);
    assert.equal(body[0], 0x5b);
  } finally {
    await w.terminate();
  }
});

test('a zstd body decodes into shared memory when it is large enough', async () => {
  const z = readFileSync(new URL('../../../test/fixtures/zstd/a-3MiB-nosize.zst', import.meta.url));
  const out = await decodeBody(z, ['zstd'], 4 << 20);
  assert.ok(out.buffer instanceof SharedArrayBuffer);
  assert.equal(out.length, 3 << 20);
  assert.ok(out.every((b) => b === 0x61));
});
