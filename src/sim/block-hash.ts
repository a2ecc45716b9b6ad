// vLLM v1 prefix-cache block hashing with `--prefix-caching-hash-algo sha256_cbor` (specs/vllm-wire.md §2):
// hash(block) = sha256(canonical CBOR of (parent_digest, tuple(token_ids), extra_keys | None)), chained from
// NONE_HASH = sha256(cbor(PYTHONHASHSEED as a string)). The CBOR is written by hand into one reused buffer:
// the triple has a fixed shape, so a general encoder would only add allocations to the hot path.
import { hash } from 'node:crypto';

/** A raw 32-byte sha256 digest. */
export type BlockDigest = Buffer;

/** Extra keys of one block, as vLLM builds them: LoRA name on every block, cache_salt on block 0 only. */
export function blockExtraKeys (blockIndex: number, loraName: string | null, cacheSalt: string | null): string[] | null {
  const keys: string[] = [];
  if (loraName !== null) keys.push(loraName);
  if (cacheSalt !== null && blockIndex === 0) keys.push(cacheSalt);
  return keys.length === 0 ? null : keys;
}

/** The low 64 bits of a digest as vLLM's int mode sends them (last 8 bytes, big-endian). */
export function digestToU64 (d: Uint8Array): bigint {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).readBigUInt64BE(d.byteLength - 8);
}

export class BlockHasher {
  readonly blockSize: number;
  readonly noneHash: BlockDigest;
  #buf: Buffer;

  constructor (blockSize: number, seed = '0') {
    if (!Number.isInteger(blockSize) || blockSize < 1 || blockSize > 4096) throw new RangeError(`block size must be an integer in 1..4096, got ${blockSize}`);
    this.blockSize = blockSize;
    // 1 (array) + 34 (bytes header + digest) + 5 (array header) + 9 per token + extras (grown on demand).
    this.#buf = Buffer.alloc(64 + 9 * blockSize);
    const s = Buffer.from(seed, 'utf8');
    const head = Buffer.alloc(9);
    const n = writeHead(head, 0, 3, s.length);
    this.noneHash = hash('sha256', Buffer.concat([head.subarray(0, n), s]), 'buffer');
  }

  /** Hash of the block tokens[start, start + blockSize) chained to `parent` (null for block 0). */
  hashBlock (parent: Uint8Array | null, tokens: ArrayLike<number>, start: number, extraKeys: readonly string[] | null): BlockDigest {
    const bs = this.blockSize;
    if (start + bs > tokens.length) throw new RangeError('only full blocks are hashed');
    let extraBytes = 0;
    if (extraKeys !== null) for (const k of extraKeys) extraBytes += 9 + Buffer.byteLength(k, 'utf8');
    if (this.#buf.length < 64 + 9 * bs + extraBytes) this.#buf = Buffer.alloc(64 + 9 * bs + extraBytes);
    const b = this.#buf;
    b[0] = 0x83;
    b[1] = 0x58; b[2] = 0x20;
    b.set(parent ?? this.noneHash, 3);
    let p = writeHead(b, 35, 4, bs);
    for (let i = start, end = start + bs; i < end; i++) {
      const t = tokens[i];
      if (t < 24 && t >= 0) b[p++] = t;
      else p = writeUint(b, p, t);
    }
    if (extraKeys === null) b[p++] = 0xf6;
    else {
      p = writeHead(b, p, 4, extraKeys.length);
      for (const k of extraKeys) {
        const len = Buffer.byteLength(k, 'utf8');
        p = writeHead(b, p, 3, len);
        p += b.write(k, p, 'utf8');
      }
    }
    return hash('sha256', b.subarray(0, p), 'buffer');
  }

  /**
   * Appends to `digests` the hashes of every full block of `tokens` it does not cover yet, so a prompt that
   * extends an earlier one reuses the earlier hashes (the caller vouches that the covered blocks are unchanged).
   */
  extend (digests: BlockDigest[], tokens: ArrayLike<number>, loraName: string | null, cacheSalt: string | null,
    maxBlocks = Infinity): BlockDigest[] {
    const bs = this.blockSize;
    const full = Math.min(Math.floor(tokens.length / bs), maxBlocks);
    const loraKeys = loraName === null ? null : [loraName];
    for (let i = digests.length; i < full; i++) {
      const extra = i === 0 ? blockExtraKeys(0, loraName, cacheSalt) : loraKeys;
      digests.push(this.hashBlock(i === 0 ? null : digests[i - 1], tokens, i * bs, extra));
    }
    return digests;
  }
}

// CBOR head: major type in the top 3 bits, then the shortest argument encoding (canonical form).
function writeHead (b: Buffer, p: number, major: number, n: number): number {
  const m = major << 5;
  if (n < 24) { b[p] = m | n; return p + 1; }
  if (n < 0x100) { b[p] = m | 24; b[p + 1] = n; return p + 2; }
  if (n < 0x10000) { b[p] = m | 25; b.writeUInt16BE(n, p + 1); return p + 3; }
  if (n < 0x100000000) { b[p] = m | 26; b.writeUInt32BE(n, p + 1); return p + 5; }
  b[p] = m | 27; b.writeBigUInt64BE(BigInt(n), p + 1); return p + 9;
}

function writeUint (b: Buffer, p: number, t: number): number {
  if (!Number.isSafeInteger(t) || t < 0) throw new RangeError(`token ids must be non-negative integers, got ${t}`);
  return writeHead(b, p, 0, t);
}
