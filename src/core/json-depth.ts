// How deep a client's JSON nests, found without recursion (pure: no I/O). JSON.parse takes any depth, but every later walk of
// the body (Python's json.dumps of a tool_use input, a chat template's tojson, JSON.stringify when a field is
// dropped, the engine's own parser) recurses: a body nested past MAX_JSON_DEPTH is refused at the door (400)
// rather than overflowing a stack somewhere later (a 500, or an engine that never answers).

/** Whether `doc` (what JSON.parse returned) has an object or array nested deeper than `max` levels. */
export function nestsDeeperThan (doc: unknown, max: number): boolean {
  if (typeof doc !== 'object' || doc === null) return false;
  const values: object[] = [doc];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop()!;
    const d = depths.pop()!;
    if (d > max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof x === 'object' && x !== null) {
        values.push(x);
        depths.push(d + 1);
      }
    }
  }
  return false;
}
