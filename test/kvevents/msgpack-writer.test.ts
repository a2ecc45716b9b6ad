import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decode } from '@msgpack/msgpack';
import { MsgpackWriter } from '../../src/kvevents/msgpack-writer.js';

function written (f: (w: MsgpackWriter) => void): Uint8Array {
  const w = new MsgpackWriter(4);
  f(w);
  return w.bytes();
}
const head = (b: Uint8Array, n: number): string => Buffer.from(b.subarray(0, n)).toString('hex');

test('ints take the smallest msgpack form, as msgspec writes them', () => {
  const cases: Array<[number | bigint, string]> = [
    [0, '00'], [127, '7f'], [128, 'cc80'], [255, 'ccff'], [256, 'cd0100'], [65535, 'cdffff'], [65536, 'ce00010000'],
    [2 ** 32 - 1, 'ceffffffff'], [2 ** 32, 'cf0000000100000000'], [-1, 'ff'], [-32, 'e0'], [-33, 'd0df'], [-128, 'd080'],
    [-129, 'd1ff7f'], [-32768, 'd18000'], [-32769, 'd2ffff7fff'], [-(2 ** 31), 'd280000000'], [-(2 ** 31) - 1, 'd3ffffffff7fffffff'],
    [42n, '2a'], [-5n, 'fb'], [(1n << 64n) - 1n, 'cfffffffffffffffff'], [-(1n << 63n), 'd38000000000000000'],
  ];
  for (const [n, hex] of cases) {
    const b = written((w) => w.int(n));
    assert.equal(Buffer.from(b).toString('hex'), hex, String(n));
    assert.equal(BigInt(decode(b, { useBigInt64: true }) as number | bigint), BigInt(n));
  }
  assert.throws(() => written((w) => w.int(1.5)), RangeError);
  assert.throws(() => written((w) => w.int(1n << 64n)), RangeError);
  assert.throws(() => written((w) => w.int(-(1n << 63n) - 1n)), RangeError);
});

test('strings, bins, arrays and maps switch header forms at the msgpack limits; the buffer grows as needed', () => {
  for (const [n, h] of [[31, 'bf'], [32, 'd920'], [255, 'd9ff'], [256, 'da0100'], [70000, 'db00011170']] as const) {
    const b = written((w) => w.str('é'.repeat(n / 2) + 'x'.repeat(n % 2)));
    assert.equal(head(b, h.length / 2), h, `str ${n}`);
    assert.equal((decode(b) as string).length, Math.floor(n / 2) + (n % 2));
  }
  for (const [n, h] of [[255, 'c4ff'], [256, 'c50100'], [70000, 'c600011170']] as const) {
    const b = written((w) => w.bin(new Uint8Array(n).fill(7)));
    assert.equal(head(b, h.length / 2), h, `bin ${n}`);
    assert.equal((decode(b) as Uint8Array).length, n);
  }
  for (const [n, h] of [[15, '9f'], [16, 'dc0010'], [70000, 'dd00011170']] as const) {
    const b = written((w) => w.value(new Array(n).fill(1)));
    assert.equal(head(b, h.length / 2), h, `array ${n}`);
    assert.equal((decode(b) as number[]).length, n);
  }
  assert.equal(head(written((w) => w.mapHeader(15)), 1), '8f');
  assert.equal(head(written((w) => w.mapHeader(16)), 3), 'de0010');
  assert.equal(Buffer.from(written((w) => w.float64(1))).toString('hex'), 'cb3ff0000000000000');
  assert.deepEqual(decode(written((w) => w.value([null, true, false, 0.5, 'a', [2n]])), { useBigInt64: true }), [null, true, false, 0.5, 'a', [2]]);
  assert.throws(() => written((w) => w.value({ a: 1 })), TypeError);
});
