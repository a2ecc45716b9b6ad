// Backends as the proxy names them ("IP:port", IPv6 in brackets as Go's net.JoinHostPort writes it), and the
// endpoint lists a proxy may send: the subset hint in the request's metadata and the conformance suite's test
// header. An entry without a port allows every port of that address, as GIE's reference picker reads them.
import type { Backend } from '../fleet/backends.js';

/** "host:port" of a backend's URL (the port defaulted by scheme). */
export function endpointOf (b: Backend): string {
  const u = new URL(b.config.url);
  const port = u.port !== '' ? u.port : u.protocol === 'https:' ? '443' : '80';
  return `${u.hostname}:${port}`;
}

/** Splits "host:port" (IPv6 in brackets) into its parts; port '' when there is none. */
function split (ep: string): { host: string; port: string } {
  const s = ep.trim();
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0) return { host: s, port: '' };
    return { host: s.slice(0, end + 1), port: s[end + 1] === ':' ? s.slice(end + 2) : '' };
  }
  const colon = s.indexOf(':');
  // More than one colon and no brackets: a bare IPv6 address.
  if (colon < 0 || s.indexOf(':', colon + 1) >= 0) return { host: s.includes(':') ? `[${s}]` : s, port: '' };
  return { host: s.slice(0, colon), port: s.slice(colon + 1) };
}

/** Most entries read from one list: a subset names pods of one pool, far fewer than this. */
export const MAX_LISTED_ENDPOINTS = 1024;

/** Endpoints from a comma-separated string or a list of them (nested commas split too), trimmed, empty ones dropped. */
export function endpointList (v: unknown): string[] {
  const out: string[] = [];
  const add = (s: string): void => {
    for (const part of s.split(',')) {
      const t = part.trim();
      if (t !== '' && out.length < MAX_LISTED_ENDPOINTS) out.push(t);
    }
  };
  if (typeof v === 'string') add(v);
  else if (Array.isArray(v)) for (const x of v) if (typeof x === 'string') add(x);
  return out;
}

/** Which endpoints a list allows: exact "host:port" entries, and hosts listed without a port (any port). */
export class EndpointFilter {
  readonly #exact = new Set<string>();
  readonly #anyPort = new Set<string>();

  constructor (entries: readonly string[]) {
    for (const e of entries) {
      const { host, port } = split(e);
      if (port === '') this.#anyPort.add(host);
      else this.#exact.add(`${host}:${port}`);
    }
  }

  allows (endpoint: string): boolean {
    return this.#exact.has(endpoint) || this.#anyPort.has(split(endpoint).host);
  }
}
