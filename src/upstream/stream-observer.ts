// Watches an upstream response as it passes through, without changing a byte: when the first content token
// arrives, and the usage the engine reports (prompt, completion and cached tokens), in the shape of the API it
// speaks (src/dialects/stream-shapes.ts), and whether it ended in a tool call. SSE events are parsed only until
// the first token is seen; after that only an event that mentions "usage" or "error", or names how the answer
// ended (a finish_reason or stop_reason that is not null), is parsed.
import { endAt, keyAt, OPENAI_STREAM, type StreamShape, type Usage } from '../dialects/stream-shapes.js';

export type { Usage };

const USAGE = '"usage"';
const ERROR = '"error"';

export class StreamObserver {
  /** Set once the first event carrying generated text (or a token of any kind) passes. */
  firstTokenSeen = false;
  usage: Usage | null = null;
  /** An error event seen in the stream (engines send errors in-band once streaming has begun). */
  streamError: string | null = null;
  /** Chunk events carrying text, counted as a proxy for output tokens when usage is absent. */
  contentEvents = 0;
  /** The id of the response, where the API names one (Responses). */
  responseId: string | null = null;
  /** The answer ended in a tool call (the last end the stream named). */
  toolCall = false;
  readonly #shape: StreamShape;
  readonly #sse: boolean;
  #carry = '';
  #json: Buffer[] = [];
  #jsonBytes = 0;
  readonly #maxJsonBytes: number;

  constructor (contentType: string, shape: StreamShape = OPENAI_STREAM, maxJsonBytes = 8 << 20) {
    this.#shape = shape;
    this.#sse = contentType.includes('text/event-stream');
    this.#maxJsonBytes = maxJsonBytes;
  }

  /** Feed each chunk as it passes; returns true if this chunk carried the first token. */
  push (chunk: Buffer): boolean {
    if (!this.#sse) {
      // A non-streaming body is one JSON document: keep it (bounded) and read it at the end.
      if (this.#jsonBytes + chunk.length <= this.#maxJsonBytes) this.#json.push(chunk);
      this.#jsonBytes += chunk.length;
      return false;
    }
    const before = this.firstTokenSeen;
    const text = this.#carry + chunk.toString('utf8');
    let start = 0;
    // Where the next "usage" / "error" might be: events before it that are one data line need no parsing.
    let usageAt = -2;
    let errorAt = -2;
    let endsAt = -2;
    const endKey = this.#shape.endKey;
    for (;;) {
      const end = text.indexOf('\n\n', start);
      if (end < 0) break;
      if (this.firstTokenSeen && text.startsWith('data:', start)) {
        if (usageAt !== -1 && usageAt < start) usageAt = keyAt(text, USAGE, 1, start);
        if (errorAt !== -1 && errorAt < start) errorAt = keyAt(text, ERROR, 2, start);
        if (endKey !== null && endsAt !== -1 && endsAt < start) endsAt = endAt(text, endKey, start);
        const nl = text.indexOf('\n', start);
        if ((usageAt < 0 || usageAt >= end) && (errorAt < 0 || errorAt >= end) && (endsAt < 0 || endsAt >= end) && nl === end) {
          // The same count #event would make, without slicing the event out.
          const from = start + (text.charCodeAt(start + 5) === 32 ? 6 : 5);
          if (from < end && !(end - from === 6 && text.startsWith('[DONE]', from))) this.contentEvents++;
          start = end + 2;
          continue;
        }
      }
      this.#event(text.slice(start, end));
      start = end + 2;
    }
    this.#carry = text.slice(start);
    if (this.#carry.length > this.#maxJsonBytes) this.#carry = ''; // a runaway event: stop looking at it
    return !before && this.firstTokenSeen;
  }

  /** Call when the body has ended. */
  end (): void {
    if (this.#sse) {
      if (this.#carry.trim() !== '') this.#event(this.#carry);
      this.#carry = '';
      return;
    }
    if (this.#jsonBytes === 0 || this.#jsonBytes > this.#maxJsonBytes) return;
    const doc = parse(Buffer.concat(this.#json).toString('utf8'));
    this.#json = [];
    if (!doc) return;
    if (this.#shape.hasContent(doc)) this.firstTokenSeen = true;
    this.#read(doc);
  }

  #event (block: string): void {
    // An SSE event may have several data: lines; comments (":") and other fields are ignored.
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('data:')) data += line.slice(line.charCodeAt(5) === 32 ? 6 : 5);
    }
    if (data === '' || data === '[DONE]') return;
    const usage = keyAt(data, USAGE, 1, 0) >= 0;
    const error = keyAt(data, ERROR, 2, 0) >= 0;
    const ends = this.#shape.endKey !== null && endAt(data, this.#shape.endKey, 0) >= 0;
    if (this.firstTokenSeen && !usage && !error) {
      this.contentEvents++;
      if (ends) this.#readEnd(parse(data));
      return;
    }
    // A chunk that cannot hold output, usage, an error or the end (a role chunk: "content":"") is not worth a parse.
    if (!usage && !error && !ends && this.#shape.cannotHoldOutput(data)) return;
    const doc = parse(data);
    if (!doc) return;
    if (this.#shape.hasContent(doc)) {
      this.firstTokenSeen = true;
      this.contentEvents++;
    }
    this.#read(doc);
  }

  /** An event's (or the body's) error, usage and response id. */
  #read (doc: Record<string, unknown>): void {
    const shape = this.#shape;
    const error = shape.error(doc);
    if (error !== null) this.streamError = error;
    const usage = shape.usage(doc, this.usage);
    if (usage !== null) this.usage = usage;
    if (this.responseId === null) this.responseId = shape.responseId(doc);
    this.#readEnd(doc);
  }

  /** Whether an event (or the body) ended the answer in a tool call. */
  #readEnd (doc: Record<string, unknown> | null): void {
    const toolCall = doc === null ? null : this.#shape.toolCallEnd(doc);
    if (toolCall !== null) this.toolCall = toolCall;
  }
}

function parse (s: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(s);
    return v && typeof v === 'object' ? v : null;
  } catch {
    return null;
  }
}
