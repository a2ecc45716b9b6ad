// What the client has received of a streamed turn, kept so that a stream cut mid-way can go on from there on
// another engine (stream-resume.ts). Only whole events reach the client while a transcript is kept (the proxy
// holds a partial event until its blank line comes), so a cut never leaves half an event in the client's stream.
// Copies of the bytes, bounded: past `maxBytes` the turn cannot resume and nothing more is kept.
import { parseEvents, type ResumeDialect, type SseEvent } from './stream-resume.js';

export class StreamTranscript {
  #chunks: Buffer[] = [];
  #bytes = 0;
  /** Past maxBytes: the turn cannot resume; only the last chunk is kept (to see whether the stream ended). */
  overflowed = false;

  constructor (readonly dialect: ResumeDialect, readonly maxBytes: number) {}

  /** Whole events the client was sent. */
  add (data: Uint8Array): void {
    if (data.length === 0) return;
    if (this.overflowed || this.#bytes + data.length > this.maxBytes) {
      this.overflowed = true;
      this.#chunks = [lastEvent(Buffer.from(data.buffer, data.byteOffset, data.length))];
      return;
    }
    this.#chunks.push(Buffer.from(data));
    this.#bytes += data.length;
  }

  /** Every event the client has (empty once overflowed). */
  events (): SseEvent[] {
    if (this.overflowed) return [];
    return parseEvents(Buffer.concat(this.#chunks).toString('utf8'));
  }

  /** Whether the client's stream has its terminal event (the last event it was sent is one). */
  ended (): boolean {
    const last = this.#chunks[this.#chunks.length - 1];
    if (last === undefined) return false;
    const text = last.toString('utf8');
    const end = text.lastIndexOf('\n\n');
    if (end < 0) return false;
    const start = text.lastIndexOf('\n\n', end - 1);
    const events = parseEvents(text.slice(start < 0 ? 0 : start + 2, end + 2));
    const e = events[events.length - 1];
    return e !== undefined && this.dialect.terminal(e);
  }
}

/** A copy of the last whole event of `data` (whole events only): all ended() needs of a stream past maxBytes. */
function lastEvent (data: Buffer): Buffer {
  const end = data.lastIndexOf('\n\n');
  const start = end < 2 ? -1 : data.lastIndexOf('\n\n', end - 1);
  return Buffer.from(data.subarray(start < 0 ? 0 : start + 2));
}
