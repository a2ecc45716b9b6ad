// The uWS transport of the request pipeline (`ear serve`): one per request, over its ResponseState. It sends each
// attempt to the engine and streams the answer back (proxy.ts), and answers the client when the pipeline fails.
import type { RequestContext } from '../request/context.js';
import type { Send, SendResult, Transport } from '../request/transport.js';
import { EarError } from '../errors/errors.js';
import { attempt } from './proxy.js';
import { StreamObserver } from '../upstream/stream-observer.js';
import { requestHeaders } from '../upstream/headers.js';
import type { ResponseState } from './uws-io.js';
import type { ResumePlan } from '../resume/stream-resume.js';
import { resumeFor } from '../resume/resume-dialects.js';
import { StreamTranscript } from '../resume/transcript.js';
import { parseJson } from '../resume/stream-resume.js';

export class UwsTransport implements Transport {
  readonly #rs: ResponseState;
  readonly #rid: [string, string];
  /** What the client has of a streamed answer (for a resume); null until a send makes one, or with resumes off. */
  #transcript: StreamTranscript | null = null;

  constructor (rs: ResponseState, requestId: string) {
    this.#rs = rs;
    this.#rid = ['x-request-id', requestId];
  }

  async send (ctx: RequestContext, s: Send): Promise<SendResult> {
    const b = s.backend;
    const shape = ctx.dialect.stream;
    const p = ctx.pipeline;
    if (this.#transcript === null && p.maxResumes > 0) {
      const d = resumeFor(ctx.endpoint);
      if (d !== null) this.#transcript = new StreamTranscript(d, p.maxResumeBytes);
    }
    const { result, observer } = await attempt(this.#rs, b.pool, {
      path: ctx.target,
      body: s.body,
      headers: requestHeaders(ctx.id, s.headers),
      responseHeaders: [['x-ear-backend', b.id], this.#rid],
      final: s.final,
      observer: (contentType) => new StreamObserver(contentType, shape),
      onFirstToken: s.firstToken,
      transcript: this.#transcript,
      splice: s.splice ?? null
    });
    return { result, usage: observer?.usage ?? null, contentEvents: observer?.contentEvents ?? 0, responseId: observer?.responseId ?? null, toolCall: observer?.toolCall ?? false };
  }

  continuation (_ctx: RequestContext, body: Buffer): ResumePlan {
    const t = this.#transcript;
    if (t === null || t.overflowed) return { kind: 'refuse', reason: 'unsupported', detail: 'the stream outgrew maxResumeBytes' };
    const doc = parseJson(body.toString('utf8'));
    if (doc === null) return { kind: 'refuse', reason: 'unsupported', detail: 'the request body is not a JSON object' };
    return t.dialect.plan(doc, t.events());
  }

  finish (_ctx: RequestContext, tail: string): void {
    this.#rs.end(tail);
  }

  fail (_ctx: RequestContext, err: unknown): void {
    this.#rs.fail(err, [this.#rid]);
  }

  /** Whatever happened, the client got an answer. */
  settle (): { status: number; aborted: boolean } {
    const rs = this.#rs;
    if (!rs.ended && !rs.aborted) rs.fail(new EarError('EAR_ERR_INTERNAL', 'internal error'), [this.#rid]);
    return { status: rs.status, aborted: rs.aborted };
  }
}
