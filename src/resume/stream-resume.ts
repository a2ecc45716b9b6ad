// Resuming a streamed turn on another engine (docs/resume.md): what every API's resume shares. The client's
// stream so far is read back as SSE events (transcript.ts keeps it); each API (openai-resume.ts,
// anthropic-resume.ts, responses-resume.ts) turns it and the request body into a plan: the body that asks
// another engine to continue the turn, and a splice that rewrites that engine's events into the client's stream.
import { StringDecoder } from 'node:string_decoder';

export type Doc = Record<string, unknown>;

/** One SSE event: its `event:` field (null when absent) and its data lines joined. */
export interface SseEvent { event: string | null; data: string }

/** Rewrites one event of the resumed engine into what the client gets ('' drops it). */
export interface Splice {
  event (e: SseEvent): string;
}

/** Why a cut stream is not resumed (the ear_stream_resumes_total outcomes besides resumed, finished, failed). */
export type Refusal = 'tool_call' | 'unsupported';

export type ResumePlan =
  /** Send `body` to another engine and pass its events through `splice`. */
  | { kind: 'resume'; body: Buffer; splice: Splice }
  /** The turn had ended; only its terminal event was lost: write `tail` and end. */
  | { kind: 'finish'; tail: string }
  | { kind: 'refuse'; reason: Refusal; detail: string };

/** An API's resume: its terminal events, and its plan for a cut stream. */
export interface ResumeDialect {
  /** Whether `e` ends the stream (no event may follow it). */
  terminal (e: SseEvent): boolean;
  /** The plan for a stream cut after `events` reached the client, the engine having been sent `body`. */
  plan (body: Doc, events: SseEvent[]): ResumePlan;
}

/** Parses SSE text made of whole events (each ending in a blank line). */
export function parseEvents (text: string): SseEvent[] {
  const out: SseEvent[] = [];
  let start = 0;
  for (;;) {
    const end = text.indexOf('\n\n', start);
    if (end < 0) break;
    const e = parseEvent(text.slice(start, end));
    if (e !== null) out.push(e);
    start = end + 2;
  }
  return out;
}

function parseEvent (block: string): SseEvent | null {
  let event: string | null = null;
  let data: string | null = null;
  for (const line of block.split('\n')) {
    if (line.startsWith('data:')) {
      const v = line.slice(line.charCodeAt(5) === 32 ? 6 : 5);
      data = data === null ? v : `${data}\n${v}`;
    } else if (line.startsWith('event:')) event = line.slice(line.charCodeAt(6) === 32 ? 7 : 6);
  }
  return data === null ? null : { event, data };
}

/** An event as SSE text. */
export function sse (e: SseEvent): string {
  return e.event === null ? `data: ${e.data}\n\n` : `event: ${e.event}\ndata: ${e.data}\n\n`;
}

export function parseJson (s: string): Doc | null {
  try {
    const v = JSON.parse(s);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Doc : null;
  } catch {
    return null;
  }
}

export const isDoc = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);
export const count = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;

/**
 * `max` (a body's output bound, absent: none) less the `used` tokens the client already has; null when absent,
 * undefined when nothing is left to generate.
 */
export function reducedMax (max: unknown, used: number): number | null | undefined {
  if (typeof max !== 'number') return null;
  const left = max - used;
  return left >= 1 ? left : undefined;
}

/** A resumed engine's bytes as they come, cut into whole events and passed through a splice. */
export class SpliceStream {
  readonly #splice: Splice;
  readonly #decoder = new StringDecoder('utf8');
  #carry = '';

  constructor (splice: Splice) {
    this.#splice = splice;
  }

  /** What the client gets for `chunk` (whole events only; a partial one waits for the next chunk). */
  push (chunk: Uint8Array): string {
    const text = this.#carry + this.#decoder.write(chunk as Buffer);
    const last = text.lastIndexOf('\n\n');
    if (last < 0) {
      this.#carry = text;
      return '';
    }
    this.#carry = text.slice(last + 2);
    let out = '';
    for (const e of parseEvents(text.slice(0, last + 2))) out += this.#splice.event(e);
    return out;
  }

  /** The stream ended: a last event without its blank line. */
  end (): string {
    const rest = this.#carry + this.#decoder.end();
    this.#carry = '';
    if (rest.trim() === '') return '';
    let out = '';
    for (const e of parseEvents(`${rest}\n\n`)) out += this.#splice.event(e);
    return out;
  }
}
