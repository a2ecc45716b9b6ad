// Resuming Anthropic Messages streams (docs/resume.md): the content so far goes to the next engine as a trailing
// assistant turn (Anthropic's prefill), `max_tokens` shrunk by the tokens already sent. The next engine's
// message_start is dropped (the client has one, with the message id), its content block indexes continue the
// client's (its first text block continues a text block left open), and its usage is summed with the first's.
import { count, isDoc, parseJson, reducedMax, type Doc, type ResumeDialect, type ResumePlan, type Splice, type SseEvent } from './stream-resume.js';

interface Block { type: string; text: string; json: string; id: unknown; name: unknown; stopped: boolean }

interface MessagesSoFar {
  blocks: Map<number, Block>;
  /** input_tokens of the first message_start, when it came. */
  inputTokens: number | null;
  deltas: number;
  /** message_delta came: the turn had ended, only message_stop may be missing. */
  finished: boolean;
}

function read (events: SseEvent[]): MessagesSoFar {
  const s: MessagesSoFar = { blocks: new Map(), inputTokens: null, deltas: 0, finished: false };
  for (const e of events) {
    const doc = parseJson(e.data);
    if (doc === null) continue;
    const index = typeof doc.index === 'number' ? doc.index : -1;
    switch (doc.type) {
      case 'message_start': {
        const u = isDoc(doc.message) ? doc.message.usage : undefined;
        if (s.inputTokens === null && isDoc(u) && typeof u.input_tokens === 'number') s.inputTokens = u.input_tokens;
        break;
      }
      case 'content_block_start': {
        const b = isDoc(doc.content_block) ? doc.content_block : {};
        s.blocks.set(index, { type: String(b.type), text: typeof b.text === 'string' ? b.text : '', json: '', id: b.id, name: b.name, stopped: false });
        break;
      }
      case 'content_block_delta': {
        const b = s.blocks.get(index);
        const d = doc.delta;
        if (b === undefined || !isDoc(d)) break;
        s.deltas++;
        if (typeof d.text === 'string') b.text += d.text;
        else if (typeof d.partial_json === 'string') b.json += d.partial_json;
        else if (typeof d.thinking === 'string') b.text += d.thinking;
        break;
      }
      case 'content_block_stop': {
        const b = s.blocks.get(index);
        if (b !== undefined) b.stopped = true;
        break;
      }
      case 'message_delta':
        s.finished = true;
        break;
      default:
    }
  }
  return s;
}

function plan (body: Doc, events: SseEvent[]): ResumePlan {
  const s = read(events);
  if (s.finished) return { kind: 'finish', tail: 'event: message_stop\ndata: {"type":"message_stop"}\n\n' };
  const content: Doc[] = [];
  let open = -1;
  for (const [i, b] of [...s.blocks].sort((x, y) => x[0] - y[0])) {
    if (b.type === 'tool_use' && !b.stopped) return { kind: 'refuse', reason: 'tool_call', detail: 'the stream was cut inside a tool call\'s input' };
    if (b.type === 'tool_use') {
      const input = b.json === '' ? {} : parseJson(b.json);
      if (input === null) return { kind: 'refuse', reason: 'tool_call', detail: 'a tool call\'s input did not parse' };
      content.push({ type: 'tool_use', id: b.id, name: b.name, input });
    } else if (b.type === 'text') {
      if (b.text !== '') content.push({ type: 'text', text: b.text });
      if (!b.stopped) open = i;
    } else return { kind: 'refuse', reason: 'unsupported', detail: `the stream had a ${b.type} block, which a prefill cannot carry` };
  }
  const next: Doc = { ...body };
  const left = reducedMax(body.max_tokens, s.deltas);
  if (left === undefined) return { kind: 'refuse', reason: 'unsupported', detail: 'max_tokens was used up before the cut' };
  if (left !== null) next.max_tokens = left;
  if (content.length > 0) {
    if (!Array.isArray(body.messages)) return { kind: 'refuse', reason: 'unsupported', detail: 'no messages' };
    const messages = [...body.messages];
    const last = messages[messages.length - 1];
    // The client's own prefill is continued further: one assistant turn.
    if (isDoc(last) && last.role === 'assistant') {
      const had = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : Array.isArray(last.content) ? last.content : [];
      messages[messages.length - 1] = { ...last, content: [...had, ...content] };
    } else messages.push({ role: 'assistant', content });
    next.messages = messages;
  }
  const nextIndex = s.blocks.size === 0 ? 0 : Math.max(...s.blocks.keys()) + 1;
  return { kind: 'resume', body: Buffer.from(JSON.stringify(next)), splice: new MessagesSplice(s, open, nextIndex) };
}

const event = (type: string, doc: Doc): string => `event: ${type}\ndata: ${JSON.stringify(doc)}\n\n`;

class MessagesSplice implements Splice {
  /** Where the next engine's block 0 lands; decided at its first block. */
  #offset = -1;

  constructor (readonly s: MessagesSoFar, readonly open: number, readonly nextIndex: number) {}

  /** Fixes the offset before the next engine's first block (or its end): a client block left open is closed unless continued. */
  #place (continues: boolean): string {
    if (this.#offset >= 0) return '';
    if (this.open < 0) {
      this.#offset = this.nextIndex;
      return '';
    }
    if (continues) {
      this.#offset = this.open;
      return '';
    }
    this.#offset = this.nextIndex;
    return event('content_block_stop', { type: 'content_block_stop', index: this.open });
  }

  event (e: SseEvent): string {
    const doc = parseJson(e.data);
    if (doc === null) return `event: ${e.event ?? 'message'}\ndata: ${e.data}\n\n`;
    const type = typeof doc.type === 'string' ? doc.type : e.event ?? 'message';
    switch (type) {
      case 'message_start':
        return '';
      case 'content_block_start': {
        const j = count(doc.index);
        const text = isDoc(doc.content_block) && doc.content_block.type === 'text';
        const head = this.#place(j === 0 && text);
        if (j === 0 && this.#offset === this.open) return head;
        return head + event(type, { ...doc, index: this.#offset + j });
      }
      case 'content_block_delta':
      case 'content_block_stop':
        return this.#place(false) + event(type, { ...doc, index: this.#offset + count(doc.index) });
      case 'message_delta': {
        const head = this.#place(false);
        if (isDoc(doc.usage)) doc.usage = this.#usage(doc.usage);
        return head + event(type, doc);
      }
      default:
        return event(type, doc);
    }
  }

  /** The whole turn's: the client's prompt (the first engine's input tokens), the output of both engines. */
  #usage (u: Doc): Doc {
    const used = this.s.deltas;
    const input = this.s.inputTokens ?? Math.max(0, count(u.input_tokens) - used);
    return { ...u, input_tokens: input, output_tokens: used + count(u.output_tokens) };
  }
}

export const MESSAGES_RESUME: ResumeDialect = {
  terminal: (e) => e.event === 'message_stop' || e.event === 'error',
  plan
};
