// Python's json.dumps(value) with its defaults (separators ", " and ": ", ensure_ascii=True), for the strings
// vLLM builds with it: a tool call's `arguments` converted from an Anthropic tool_use block's `input`. The
// template parses arguments back into an object, so tokens do not depend on it; the text does match vLLM's.
// Pure: no I/O.

function pyString (s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, '0')}`; // UTF-16 units, as Python escapes
    else out += s[i];
  }
  return `${out}"`;
}

function pyNumber (n: number): string {
  // JSON integers are Python ints (all their digits); a JS number cannot tell 1.0 from 1.
  if (Number.isInteger(n)) return BigInt(n).toString();
  // Python's float repr writes an exponent with at least two digits (1e-07, where JS writes 1e-7).
  return String(n).replace(/e([+-])(\d)$/, 'e$10$2');
}

/** json.dumps(value); `value` is JSON data (what JSON.parse returns). */
export function pythonJsonDumps (value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') return Number.isFinite(value) ? pyNumber(value) : 'null';
  if (typeof value === 'string') return pyString(value);
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `${pyString(k)}: ${pythonJsonDumps(v)}`).join(', ')}}`;
}
