// The request an agent sends for one turn, per API the e2e driver speaks: the path, the headers the agent
// names its session with, and the body built from the turn's conversation (conversation.ts). `completions`
// (token ids, built in e2e.ts) is the default; the three text APIs carry the same conversation:
// - chat: OpenAI chat completions, the system prompt as a system message (ignore_eos, as the completions body);
// - messages: Anthropic Messages as Claude Code sends it (`/v1/messages?beta=true`, anthropic-version and
//   anthropic-beta, x-claude-code-session-id naming the root session and x-claude-code-agent-id /
//   x-claude-code-parent-agent-id a sub-agent, system and message content as text blocks with Claude Code's
//   cache_control marks, metadata.user_id);
// - responses: OpenAI Responses as Codex CLI sends it (`session-id`, instructions, the whole history as input
//   items, store: false, prompt_cache_key).
// Neither agent API has ignore_eos: the driver's engines never stop before max_tokens (stopProbability 0).
// Every body names the root session as its user, as the completions body does, so fairness sees the same users.
import type { ConversationTurn } from '../workloads/conversation.js';

export const E2E_APIS = ['completions', 'chat', 'messages', 'responses'] as const;
export type E2eApi = typeof E2E_APIS[number];
export type TextApi = Exclude<E2eApi, 'completions'>;

export function isE2eApi (v: string): v is E2eApi {
  return (E2E_APIS as readonly string[]).includes(v);
}

export interface ApiRequest {
  /** Path and query. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface TextTurn {
  readonly model: string;
  readonly conversation: ConversationTurn;
  readonly maxTokens: number;
  readonly sessionId: string;
  /** The root of the session's tree (itself for a root session). */
  readonly rootSessionId: string;
  readonly parentId: string | null;
}

/** Claude Code's version header and the beta it names its own requests with. */
export const ANTHROPIC_VERSION = '2023-06-01';
const ANTHROPIC_BETA = 'claude-code-20250219';
const EPHEMERAL = { type: 'ephemeral' } as const;

export function textRequest (api: TextApi, t: TextTurn): ApiRequest {
  switch (api) {
    case 'chat': return chatRequest(t);
    case 'messages': return messagesRequest(t);
    case 'responses': return responsesRequest(t);
  }
}

function chatRequest (t: TextTurn): ApiRequest {
  const c = t.conversation;
  const messages = [...(c.system === null ? [] : [{ role: 'system', content: c.system }]), ...c.messages.map((m) => ({ role: m.role, content: m.text }))];
  const body = {
    model: t.model, messages, max_tokens: t.maxTokens, ignore_eos: true, stream: true, stream_options: { include_usage: true }, user: t.rootSessionId
  };
  return { path: '/v1/chat/completions', headers: { 'x-session-id': t.sessionId }, body: JSON.stringify(body) };
}

/** A sub-agent's id under its root session (`root:agent` in the workloads' ids), or null for a root session. */
function agentId (sessionId: string, rootSessionId: string): string | null {
  if (sessionId === rootSessionId) return null;
  return sessionId.startsWith(`${rootSessionId}:`) ? sessionId.slice(rootSessionId.length + 1) : sessionId;
}

function messagesRequest (t: TextTurn): ApiRequest {
  const c = t.conversation;
  const last = c.messages.length - 1;
  // Claude Code marks the system prompt and the newest message as cache breakpoints.
  const messages = c.messages.map((m, i) => ({ role: m.role, content: [i === last ? { type: 'text', text: m.text, cache_control: EPHEMERAL } : { type: 'text', text: m.text }] }));
  const body = {
    model: t.model,
    max_tokens: t.maxTokens,
    messages,
    ...(c.system === null ? {} : { system: [{ type: 'text', text: c.system, cache_control: EPHEMERAL }] }),
    metadata: { user_id: t.rootSessionId },
    stream: true
  };
  const headers: Record<string, string> = {
    'anthropic-version': ANTHROPIC_VERSION, 'anthropic-beta': ANTHROPIC_BETA, 'x-claude-code-session-id': t.rootSessionId
  };
  const agent = agentId(t.sessionId, t.rootSessionId);
  if (agent !== null) {
    headers['x-claude-code-agent-id'] = agent;
    const parent = t.parentId === null ? null : agentId(t.parentId, t.rootSessionId);
    if (parent !== null) headers['x-claude-code-parent-agent-id'] = parent;
  }
  return { path: '/v1/messages?beta=true', headers, body: JSON.stringify(body) };
}

function responsesRequest (t: TextTurn): ApiRequest {
  const c = t.conversation;
  const input = c.messages.map((m) => ({
    type: 'message', role: m.role, content: [{ type: m.role === 'assistant' ? 'output_text' : 'input_text', text: m.text }]
  }));
  const body = {
    model: t.model,
    ...(c.system === null ? {} : { instructions: c.system }),
    input,
    tools: [],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    store: false,
    stream: true,
    include: [],
    prompt_cache_key: t.sessionId,
    max_output_tokens: t.maxTokens,
    user: t.rootSessionId
  };
  return { path: '/v1/responses', headers: { 'session-id': t.sessionId }, body: JSON.stringify(body) };
}
