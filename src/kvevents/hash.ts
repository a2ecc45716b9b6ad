// vLLM's int form of a block hash: `int.from_bytes(digest, "big") & (2^64 - 1)`, i.e. the last 8 bytes
// big-endian (vllm-wire.md §2). Decoders apply the same rule to hashes sent as bytes.

export function digestToU64 (digest: Uint8Array): bigint {
  const n = digest.length;
  if (n >= 8) return new DataView(digest.buffer, digest.byteOffset + n - 8, 8).getBigUint64(0);
  let v = 0n;
  for (let i = 0; i < n; i++) v = (v << 8n) | BigInt(digest[i]);
  return v;
}
