// Resuming OpenAI chat completions and completions (docs/resume.md). Chat: the text so far goes to the next
// engine as a final assistant message with `continue_final_message: true, add_generation_prompt: false`, which
// vLLM renders as the prompt cut right after that text (no end-of-turn token), so the model continues it.
// Completions: the prompt plus the text so far. Either way `max_tokens` shrinks by the tokens already sent.
// The next engine's chunks get the first engine's id, created and model; its role chunk is dropped (the client
// has one) and its usage is summed with what the first engine sent.
import { count, isDoc, parseJson, reducedMax, sse, type Doc, type ResumeDialect, type ResumePlan, type Splice, type SseEvent } from './stream-resume.js';

/** What the client has of one OpenAI stream. */
interface OpenAiSoFar {
  id: unknown;
  created: unknown;
  model: unknown;
  text: string;
  /** Choice indexes seen (more than one: n > 1, not resumed). */
  choices: Set<number>;
  toolCalls: boolean;
  reasoning: boolean;
  /** A finish_reason came: the turn had ended, only its usage and [DONE] may be missing. */
  finished: boolean;
  /** Content chunks (one token each as vLLM streams), and the latest usage an engine reported on the way. */
  contentEvents: number;
  usage: Doc | null;
}

function read (events: SseEvent[], chat: boolean): OpenAiSoFar {
  const s: OpenAiSoFar = { id: undefined, created: undefined, model: undefined, text: '', choices: new Set(), toolCalls: false, reasoning: false, finished: false, contentEvents: 0, usage: null };
  for (const e of events) {
    const doc = parseJson(e.data);
    if (doc === null) continue;
    if (s.id === undefined && doc.id !== undefined) {
      s.id = doc.id;
      s.created = doc.created;
      s.model = doc.model;
    }
    if (isDoc(doc.usage)) s.usage = doc.usage;
    if (!Array.isArray(doc.choices)) continue;
    let content = false;
    for (const c of doc.choices) {
      if (!isDoc(c)) continue;
      s.choices.add(typeof c.index === 'number' ? c.index : 0);
      if (c.finish_reason !== null && c.finish_reason !== undefined) s.finished = true;
      if (!chat) {
        if (typeof c.text === 'string' && c.text !== '') {
          s.text += c.text;
          content = true;
        }
        continue;
      }
      const d = c.delta;
      if (!isDoc(d)) continue;
      if (typeof d.content === 'string' && d.content !== '') {
        s.text += d.content;
        content = true;
      }
      if (Array.isArray(d.tool_calls) && d.tool_calls.length > 0) s.toolCalls = true;
      if ((typeof d.reasoning_content === 'string' && d.reasoning_content !== '') || (typeof d.reasoning === 'string' && d.reasoning !== '')) s.reasoning = true;
    }
    if (content) s.contentEvents++;
  }
  return s;
}

/** Output tokens the client has: what the engine reported on the way (continuous usage), else one per content chunk. */
const sent = (s: OpenAiSoFar): number => Math.max(count(s.usage?.completion_tokens), s.contentEvents);

function plan (body: Doc, events: SseEvent[], chat: boolean): ResumePlan {
  const s = read(events, chat);
  if (s.choices.size > 1 || count(body.n) > 1) return { kind: 'refuse', reason: 'unsupported', detail: 'more than one choice' };
  // The turn had ended (its tool calls whole): only [DONE] is missing.
  if (s.finished) return { kind: 'finish', tail: 'data: [DONE]\n\n' };
  if (s.toolCalls) return { kind: 'refuse', reason: 'tool_call', detail: 'the stream was cut in a tool call' };
  if (s.reasoning) return { kind: 'refuse', reason: 'unsupported', detail: 'the stream was cut with reasoning output, which a continuation cannot carry' };
  const used = sent(s);
  const next: Doc = { ...body };
  for (const key of ['max_tokens', 'max_completion_tokens']) {
    const left = reducedMax(body[key], used);
    if (left === undefined) return { kind: 'refuse', reason: 'unsupported', detail: `${key} was used up before the cut` };
    if (left !== null) next[key] = left;
  }
  if (s.text !== '') {
    if (chat) {
      if (!Array.isArray(body.messages)) return { kind: 'refuse', reason: 'unsupported', detail: 'no messages' };
      const messages = [...body.messages];
      const last = messages[messages.length - 1];
      // The client's own prefill (continue_final_message) is continued further.
      if (body.continue_final_message === true && isDoc(last) && last.role === 'assistant' && typeof last.content === 'string') {
        messages[messages.length - 1] = { ...last, content: last.content + s.text };
      } else messages.push({ role: 'assistant', content: s.text });
      next.messages = messages;
      next.continue_final_message = true;
      next.add_generation_prompt = false;
    } else {
      const prompt = Array.isArray(body.prompt) && body.prompt.length === 1 ? body.prompt[0] : body.prompt;
      if (typeof prompt !== 'string') return { kind: 'refuse', reason: 'unsupported', detail: 'a prompt that is not one string' };
      if (body.echo === true) return { kind: 'refuse', reason: 'unsupported', detail: 'echo' };
      next.prompt = prompt + s.text;
    }
  }
  return { kind: 'resume', body: Buffer.from(JSON.stringify(next)), splice: new OpenAiSplice(s, used, chat) };
}

class OpenAiSplice implements Splice {
  constructor (readonly s: OpenAiSoFar, readonly used: number, readonly chat: boolean) {}

  event (e: SseEvent): string {
    if (e.data === '[DONE]') return sse(e);
    const doc = parseJson(e.data);
    if (doc === null || doc.error !== undefined) return sse(e);
    const s = this.s;
    if (s.id !== undefined) doc.id = s.id;
    if (s.created !== undefined) doc.created = s.created;
    if (s.model !== undefined) doc.model = s.model;
    if (this.chat && Array.isArray(doc.choices)) {
      // The role chunk the client already had; a role on a chunk with content is dropped from it.
      doc.choices = doc.choices.filter((c) => {
        if (!isDoc(c) || !isDoc(c.delta)) return true;
        const d = c.delta;
        if (d.role === undefined) return true;
        delete d.role;
        return !(Object.keys(d).every((k) => d[k] === '' || d[k] === null) && (c.finish_reason === null || c.finish_reason === undefined) && c.logprobs == null);
      });
      if ((doc.choices as unknown[]).length === 0 && !isDoc(doc.usage)) return '';
    }
    if (isDoc(doc.usage)) doc.usage = summed(doc.usage, this.s, this.used);
    return `data: ${JSON.stringify(doc)}\n\n`;
  }
}

/**
 * The usage of the whole turn: completion tokens of both engines; prompt tokens of the client's prompt (the next
 * engine's prompt held the text the first one had generated, which is output, not input, for the client).
 */
function summed (u: Doc, s: OpenAiSoFar, used: number): Doc {
  const completion = used + count(u.completion_tokens);
  const prompt = Math.max(0, count(u.prompt_tokens) - (s.text === '' ? 0 : used));
  const out: Doc = { ...u, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  const d = u.prompt_tokens_details;
  if (isDoc(d) && typeof d.cached_tokens === 'number') out.prompt_tokens_details = { ...d, cached_tokens: Math.min(d.cached_tokens, prompt) };
  return out;
}

const terminal = (e: SseEvent): boolean => e.data === '[DONE]';

export const CHAT_RESUME: ResumeDialect = { terminal, plan: (body, events) => plan(body, events, true) };
export const COMPLETIONS_RESUME: ResumeDialect = { terminal, plan: (body, events) => plan(body, events, false) };
