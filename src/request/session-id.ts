// Where a request's session id (and a sub-agent's parent session) comes from: EAR's own headers first, then
// the headers real agent clients send. Header names are lower-case (uWS and undici both give them so).
export const SESSION_HEADERS: readonly string[] = [
  'x-session-id',
  'x-claude-code-session-id', // Claude Code
  // Codex's older `session_id` never reaches a handler: the pinned uWebSockets.js build (uWebSockets v20.43)
  // never answers a request with `_` in a header name, and closes it at its idle timeout (docs/security.md
  // "Request heads"). Kept so the name is read once a build that accepts it (v20.61 on) is pinned.
  'session_id', // Codex
  'session-id', // Codex (newer)
  'x-session-affinity' // OpenCode
];

/** A sub-agent's parent session: EAR's header, then the one OpenCode and other agents send. */
export const PARENT_SESSION_HEADERS: readonly string[] = ['x-ear-parent-session-id', 'x-parent-session-id'];

// Claude Code keeps sending the parent's x-claude-code-session-id on a sub-agent's turns and names the
// sub-agent (and the agent that spawned it) in these: the sub-agent is its own session under its parent.
const CLAUDE_SESSION = 'x-claude-code-session-id';
const CLAUDE_AGENT = 'x-claude-code-agent-id';
const CLAUDE_PARENT_AGENT = 'x-claude-code-parent-agent-id';

/** Every header this file reads, for a server that must copy them out of a request before it goes. */
export const SESSION_ID_HEADERS: readonly string[] = [...SESSION_HEADERS, ...PARENT_SESSION_HEADERS, CLAUDE_AGENT, CLAUDE_PARENT_AGENT];

/** Longest session id accepted: ids are hashed, but an unbounded header should not be. */
export const MAX_SESSION_ID_BYTES = 256;

const clip = (v: string): string => v.length > MAX_SESSION_ID_BYTES ? v.slice(0, MAX_SESSION_ID_BYTES) : v;

function first (names: readonly string[], getHeader: (name: string) => string): [string, string] | null {
  for (const h of names) {
    const v = getHeader(h).trim();
    if (v !== '') return [h, clip(v)];
  }
  return null;
}

/** The first non-empty session header, trimmed; null when there is none. */
export function sessionIdFrom (getHeader: (name: string) => string): string | null {
  return sessionOf(getHeader).sessionId;
}

export interface SessionIds {
  sessionId: string | null;
  /** The session that spawned this one (a sub-agent's parent), when the client says. */
  parentSessionId: string | null;
}

/** The request's session and its parent session, from its headers. */
export function sessionOf (getHeader: (name: string) => string): SessionIds {
  const s = first(SESSION_HEADERS, getHeader);
  const parent = first(PARENT_SESSION_HEADERS, getHeader);
  if (s !== null && s[0] === CLAUDE_SESSION) {
    const agent = getHeader(CLAUDE_AGENT).trim();
    if (agent !== '') {
      const parentAgent = getHeader(CLAUDE_PARENT_AGENT).trim();
      return {
        sessionId: clip(`${s[1]}:${agent}`),
        parentSessionId: parent?.[1] ?? (parentAgent !== '' ? clip(`${s[1]}:${parentAgent}`) : s[1])
      };
    }
  }
  return { sessionId: s?.[1] ?? null, parentSessionId: parent?.[1] ?? null };
}
