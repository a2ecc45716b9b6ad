// Where a request's session id comes from: EAR's own header first, then the headers real agent clients send.
// Header names are lower-case (uWS and undici both give them so).
export const SESSION_HEADERS: readonly string[] = [
  'x-session-id',
  'x-claude-code-session-id', // Claude Code
  'session_id', // Codex
  'session-id', // Codex (newer)
  'x-session-affinity' // OpenCode
];

/** Longest session id accepted: ids are hashed, but an unbounded header should not be. */
export const MAX_SESSION_ID_BYTES = 256;

/** The first non-empty session header, trimmed; null when there is none. */
export function sessionIdFrom (getHeader: (name: string) => string): string | null {
  for (const h of SESSION_HEADERS) {
    const v = getHeader(h).trim();
    if (v !== '') return v.length > MAX_SESSION_ID_BYTES ? v.slice(0, MAX_SESSION_ID_BYTES) : v;
  }
  return null;
}
