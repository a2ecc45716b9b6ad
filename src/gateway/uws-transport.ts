// The uWS transport of the request pipeline (`ear serve`): one per request, over its ResponseState. It sends each
// attempt to the engine and streams the answer back (proxy.ts), and answers the client when the pipeline fails.
import type { RequestContext } from '../request/context.js';
import type { Send, SendResult, Transport } from '../request/transport.js';
import { EarError } from '../errors/errors.js';
import { attempt } from './proxy.js';
import { StreamObserver } from '../upstream/stream-observer.js';
import { requestHeaders } from '../upstream/headers.js';
import type { ResponseState } from './uws-io.js';

export class UwsTransport implements Transport {
  readonly #rs: ResponseState;
  readonly #rid: [string, string];

  constructor (rs: ResponseState, requestId: string) {
    this.#rs = rs;
    this.#rid = ['x-request-id', requestId];
  }

  async send (ctx: RequestContext, s: Send): Promise<SendResult> {
    const b = s.backend;
    const shape = ctx.dialect.stream;
    const { result, observer } = await attempt(this.#rs, b.pool, {
      path: ctx.target,
      body: s.body,
      headers: requestHeaders(ctx.id, s.headers),
      responseHeaders: [['x-ear-backend', b.id], this.#rid],
      final: s.final,
      observer: (contentType) => new StreamObserver(contentType, shape),
      onFirstToken: s.firstToken
    });
    return { result, usage: observer?.usage ?? null, contentEvents: observer?.contentEvents ?? 0, responseId: observer?.responseId ?? null, toolCall: observer?.toolCall ?? false };
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
