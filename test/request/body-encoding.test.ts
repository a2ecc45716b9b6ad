import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { contentCodings, decodeBody } from '../../src/request/body-encoding.js';
import { EarError } from '../../src/errors/errors.js';

const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(50_000) }], max_tokens: 8 }));

/** Frames the zstd CLI wrote (test/fixtures/zstd/README.md): Node 20 has no zstd compressor. */
const zstdFixture = (name: string): Buffer => readFileSync(new URL(`../../../test/fixtures/zstd/${name}`, import.meta.url));

async function code (p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    assert.ok(err instanceof EarError, String(err));
    return err.code;
  }
}

test('gzip, deflate, br and zstd bodies decode to the bytes sent; identity and no header change nothing', async () => {
  assert.deepEqual(contentCodings(''), []);
  assert.deepEqual(contentCodings('identity'), []);
  assert.deepEqual(contentCodings('GZIP'), ['gzip']);
  assert.deepEqual(await decodeBody(gzipSync(body), ['gzip'], 1 << 20), body);
  assert.deepEqual(await decodeBody(deflateSync(body), ['deflate'], 1 << 20), body);
  assert.deepEqual(await decodeBody(brotliCompressSync(body), ['br'], 1 << 20), body);
  // Applied in the order listed: decoded in reverse.
  assert.deepEqual(await decodeBody(gzipSync(deflateSync(body)), contentCodings('deflate, gzip'), 1 << 20), body);
  assert.equal((await decodeBody(zstdFixture('hello.zst'), ['zstd'], 1 << 20)).toString(), 'hello zstd\n');
  // A frame that does not declare its size (streamed), larger than the first buffer tried.
  assert.deepEqual(await decodeBody(zstdFixture('a-3MiB-nosize.zst'), ['zstd'], 4 << 20), Buffer.alloc(3 << 20, 'a'));
});

test('a decompression bomb is refused at the bound (413) without the memory it asks for', async () => {
  const bomb = Buffer.alloc(64 << 20); // 64 MiB of zeros: a few KB compressed
  assert.equal(await code(decodeBody(gzipSync(bomb), ['gzip'], 1 << 20)), 'EAR_ERR_BODY_TOO_LARGE');
  assert.equal(await code(decodeBody(brotliCompressSync(bomb), ['br'], 1 << 20)), 'EAR_ERR_BODY_TOO_LARGE');
  const z = zstdFixture('bomb-64MiB-zeros.zst');
  assert.ok(z.length < 64 << 10);
  const before = process.memoryUsage().arrayBuffers;
  assert.equal(await code(decodeBody(z, ['zstd'], 1 << 20)), 'EAR_ERR_BODY_TOO_LARGE');
  assert.ok(process.memoryUsage().arrayBuffers - before < 16 << 20, 'bounded by the limit, not the frame');
  assert.equal(await code(decodeBody(zstdFixture('a-3MiB-nosize.zst'), ['zstd'], 1 << 20)), 'EAR_ERR_BODY_TOO_LARGE');
  // A frame whose header asks for a 1 GiB window (one raw block of 'x'): refused before fzstd allocates it.
  const hugeWindow = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 20 << 3, 0x09, 0x00, 0x00, 0x78]);
  assert.equal(await code(decodeBody(hugeWindow, ['zstd'], 1 << 20)), 'EAR_ERR_BODY_TOO_LARGE');
  const smallWindow = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x09, 0x00, 0x00, 0x78]);
  assert.equal((await decodeBody(Buffer.concat([smallWindow, smallWindow]), ['zstd'], 1 << 20)).toString(), 'xx', 'two frames');
  // Exactly at the bound passes.
  assert.equal((await decodeBody(gzipSync(Buffer.alloc(1 << 20)), ['gzip'], 1 << 20)).length, 1 << 20);
});

test('corrupt bodies are 400 and unknown codings 415', async () => {
  assert.equal(await code(decodeBody(Buffer.from('not gzip at all'), ['gzip'], 1 << 20)), 'EAR_ERR_BAD_REQUEST');
  assert.equal(await code(decodeBody(Buffer.from('not zstd at all'), ['zstd'], 1 << 20)), 'EAR_ERR_BAD_REQUEST');
  assert.equal(await code(decodeBody(gzipSync(body).subarray(0, 100), ['gzip'], 1 << 20)), 'EAR_ERR_BAD_REQUEST');
  assert.throws(() => contentCodings('compress'), (e: unknown) => e instanceof EarError && e.code === 'EAR_ERR_UNSUPPORTED_ENCODING' && e.status === 415);
});
