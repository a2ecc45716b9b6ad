// Resuming OpenAI Responses streams (docs/resume.md). vLLM continues a Responses turn whose input ends with an
// assistant message left `in_progress` (its should_continue_final_message: the prompt is rendered with
// continue_final_message), so the text so far goes to the next engine that way, `max_output_tokens` shrunk by the
// tokens already sent. The next engine's response.created and in_progress are dropped (the client has them, with
// the response id), its first message item continues the client's open one (same item id, output index, and the
// done events carry the whole text), later items' output indexes continue, every sequence_number follows the
// client's last, and response.completed names the first response id with the output and usage of the whole turn.
// Not resumed: a request with previous_response_id (the stored response is the dead engine's), and a stream with
// items other than messages (a function call cut in its arguments is a tool_call refusal).
import { count, isDoc, parseJson, reducedMax, type Doc, type ResumeDialect, type ResumePlan, type Splice, type SseEvent } from './stream-resume.js';

const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete', 'error']);

interface Item { id: unknown; type: string; text: string; done: boolean }

interface ResponsesSoFar {
  response: Doc | null;
  items: Map<number, Item>;
  seq: number;
  deltas: number;
}

function read (events: SseEvent[]): ResponsesSoFar {
  const s: ResponsesSoFar = { response: null, items: new Map(), seq: -1, deltas: 0 };
  for (const e of events) {
    const doc = parseJson(e.data);
    if (doc === null) continue;
    if (typeof doc.sequence_number === 'number') s.seq = Math.max(s.seq, doc.sequence_number);
    const index = typeof doc.output_index === 'number' ? doc.output_index : -1;
    switch (doc.type) {
      case 'response.created':
        if (isDoc(doc.response)) s.response = doc.response;
        break;
      case 'response.output_item.added': {
        const item = isDoc(doc.item) ? doc.item : {};
        s.items.set(index, { id: item.id, type: String(item.type), text: '', done: false });
        break;
      }
      case 'response.output_text.delta': {
        const item = s.items.get(index);
        if (item !== undefined && typeof doc.delta === 'string') item.text += doc.delta;
        s.deltas++;
        break;
      }
      case 'response.output_item.done': {
        const item = s.items.get(index);
        if (item !== undefined) item.done = true;
        break;
      }
      default:
        if (typeof doc.type === 'string' && doc.type.endsWith('.delta')) s.deltas++;
    }
  }
  return s;
}

function plan (body: Doc, events: SseEvent[]): ResumePlan {
  const s = read(events);
  if (typeof body.previous_response_id === 'string') return { kind: 'refuse', reason: 'unsupported', detail: 'previous_response_id (the response is stored on the engine that failed)' };
  const said: Doc[] = [];
  let open = -1;
  for (const [i, item] of [...s.items].sort((x, y) => x[0] - y[0])) {
    if (item.type === 'function_call') return { kind: 'refuse', reason: item.done ? 'unsupported' : 'tool_call', detail: 'the stream had a function call' };
    if (item.type !== 'message') return { kind: 'refuse', reason: 'unsupported', detail: `the stream had a ${item.type} item` };
    if (!item.done) open = i;
    if (item.text !== '') said.push({ type: 'message', role: 'assistant', status: item.done ? 'completed' : 'in_progress', content: [{ type: 'output_text', text: item.text, annotations: [] }] });
  }
  const next: Doc = { ...body };
  const left = reducedMax(body.max_output_tokens, s.deltas);
  if (left === undefined) return { kind: 'refuse', reason: 'unsupported', detail: 'max_output_tokens was used up before the cut' };
  if (left !== null) next.max_output_tokens = left;
  if (said.length > 0) {
    // vLLM continues only a final assistant message left in progress.
    if (open < 0) return { kind: 'refuse', reason: 'unsupported', detail: 'the stream was cut between items' };
    const input = typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : null;
    if (input === null) return { kind: 'refuse', reason: 'unsupported', detail: 'no input' };
    next.input = [...input, ...said];
  }
  const nextIndex = s.items.size === 0 ? 0 : Math.max(...s.items.keys()) + 1;
  return { kind: 'resume', body: Buffer.from(JSON.stringify(next)), splice: new ResponsesSplice(s, open, nextIndex) };
}

class ResponsesSplice implements Splice {
  #seq: number;
  /** The next engine's first message item, which continues the client's open one. */
  #merged = false;

  constructor (readonly s: ResponsesSoFar, readonly open: number, readonly nextIndex: number) {
    this.#seq = s.seq + 1;
  }

  #emit (doc: Doc): string {
    doc.sequence_number = this.#seq++;
    return `event: ${String(doc.type)}\ndata: ${JSON.stringify(doc)}\n\n`;
  }

  get #prefix (): string {
    return this.s.items.get(this.open)?.text ?? '';
  }

  /** Whether `doc` belongs to the next engine's item that continues the client's open one; maps its index and id. */
  #place (doc: Doc): boolean {
    const j = count(doc.output_index);
    const ours = this.#merged && j === 0;
    if (typeof doc.output_index === 'number') doc.output_index = (this.#merged ? this.open : this.nextIndex) + j;
    if (ours && doc.item_id !== undefined) doc.item_id = this.s.items.get(this.open)!.id;
    return ours;
  }

  event (e: SseEvent): string {
    const doc = parseJson(e.data);
    if (doc === null) return `event: ${e.event ?? 'message'}\ndata: ${e.data}\n\n`;
    switch (doc.type) {
      case 'response.created':
      case 'response.in_progress':
        return '';
      case 'response.output_item.added':
        if (!this.#merged && this.open >= 0 && count(doc.output_index) === 0 && isDoc(doc.item) && doc.item.type === 'message') {
          this.#merged = true;
          return '';
        }
        this.#place(doc);
        return this.#emit(doc);
      case 'response.content_part.added':
        if (this.#place(doc)) return '';
        return this.#emit(doc);
      case 'response.output_text.done':
        if (this.#place(doc) && typeof doc.text === 'string') doc.text = this.#prefix + doc.text;
        return this.#emit(doc);
      case 'response.content_part.done':
        if (this.#place(doc) && isDoc(doc.part) && typeof doc.part.text === 'string') doc.part = { ...doc.part, text: this.#prefix + doc.part.text };
        return this.#emit(doc);
      case 'response.output_item.done':
        if (this.#place(doc) && isDoc(doc.item)) doc.item = this.#whole(doc.item, this.s.items.get(this.open)!.id);
        return this.#emit(doc);
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
        if (isDoc(doc.response)) doc.response = this.#response(doc.response);
        return this.#emit(doc);
      default:
        this.#place(doc);
        return this.#emit(doc);
    }
  }

  /** A message item with the client's text before the next engine's. */
  #whole (item: Doc, id: unknown): Doc {
    const content = Array.isArray(item.content) ? item.content.map((p, i) => i === 0 && isDoc(p) && typeof p.text === 'string' ? { ...p, text: this.#prefix + p.text } : p) : item.content;
    return { ...item, id, content };
  }

  /** The whole turn's response: the first response's id, the client's earlier items, the usage of both engines. */
  #response (r: Doc): Doc {
    const first = this.s.response ?? {};
    const earlier: Doc[] = [];
    for (const [i, item] of [...this.s.items].sort((x, y) => x[0] - y[0])) {
      if (i !== this.open) earlier.push({ id: item.id, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: item.text, annotations: [], logprobs: null }] });
    }
    const output = Array.isArray(r.output) ? r.output.map((item, j) => j === 0 && this.#merged && isDoc(item) ? this.#whole(item, item.id) : item) : [];
    const out: Doc = { ...r, id: first.id ?? r.id, created_at: first.created_at ?? r.created_at, output: [...earlier, ...output] };
    if (typeof first.max_output_tokens === 'number' || first.max_output_tokens === null) out.max_output_tokens = first.max_output_tokens;
    if (isDoc(r.usage)) {
      const used = this.s.deltas;
      const u = r.usage;
      const said = [...this.s.items.values()].some((item) => item.text !== '');
      const input = Math.max(0, count(u.input_tokens) - (said ? used : 0));
      const output = used + count(u.output_tokens);
      out.usage = { ...u, input_tokens: input, output_tokens: output, total_tokens: input + output };
    }
    return out;
  }
}

export const RESPONSES_RESUME: ResumeDialect = {
  terminal: (e) => e.event !== null && TERMINAL.has(e.event),
  plan
};
