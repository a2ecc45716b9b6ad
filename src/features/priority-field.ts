// Writes the engine's `priority` into a forwarded body (src/core/engine-priority.ts says which value) without
// parsing it again: the body is a JSON object EAR already parsed (or built), and the client's own `priority` was
// stripped from it (request-body.ts), so appending the member before the closing brace is exact. An agent's body
// is ~140 KB: a re-serialisation per request would cost what the route pool saved.

const CLOSE = 0x7d; // }
const OPEN = 0x7b; // {

function isSpace (c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/**
 * `body` with `"priority":value` as its last member; `body` itself when value is null. Throws a RangeError for a
 * body that is not a JSON object's bytes (a caller's bug: every forwarded body was parsed as one).
 */
export function withPriorityField (body: Buffer, value: number | null): Buffer {
  if (value === null) return body;
  if (!Number.isSafeInteger(value)) throw new RangeError(`an engine priority must be a safe integer, got ${value}`);
  let end = body.length - 1;
  while (end >= 0 && isSpace(body[end])) end--;
  let start = 0;
  while (start < body.length && isSpace(body[start])) start++;
  if (end <= start || body[start] !== OPEN || body[end] !== CLOSE) throw new RangeError('a forwarded body must be a JSON object');
  let inner = end - 1;
  while (inner > start && isSpace(body[inner])) inner--;
  const member = `${inner === start ? '' : ','}"priority":${value}}`;
  const out = Buffer.allocUnsafe(end + Buffer.byteLength(member));
  body.copy(out, 0, 0, end);
  out.write(member, end, 'latin1');
  return out;
}
