// Where a request body is kept once read. Bodies from SHARED_BODY_MIN_BYTES on live in a SharedArrayBuffer: they
// are the ones the route pool may take (its bounds: src/features/inline-features.ts), and posting a view of shared
// memory to a thread shares it where a plain buffer is cloned. The clone of a freshly read 130 KB body took 0.3-0.5
// ms of the main thread (250 µs against 34 µs for a shared one, in a two-thread script). Nothing writes a body once
// it is read, so sharing it is safe.

export const SHARED_BODY_MIN_BYTES = 16 << 10;

/** A buffer of `size` bytes for a body, shared from SHARED_BODY_MIN_BYTES on (contents unset, as allocUnsafe). */
export function bodyBuffer (size: number): Buffer {
  return size >= SHARED_BODY_MIN_BYTES ? Buffer.from(new SharedArrayBuffer(size)) : Buffer.allocUnsafeSlow(size);
}

/** `chunks` copied one after the other into a bodyBuffer of `size` bytes, their total. */
export function joinBody (chunks: readonly Uint8Array[], size: number): Buffer {
  const out = bodyBuffer(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
