// One ext_proc stream: one HTTP request as the proxy sees it, phase by phase. Request headers and body are
// gathered, the picker names the endpoints, and the answer goes back in the shape the body mode asks for:
//   FULL_DUPLEX_STREAMED: nothing until the body's end; then the headers response (the endpoint header, the
//     route cache cleared, `envoy.lb` metadata) and the body re-sent in chunks of at most BODY_CHUNK_BYTES.
//   BUFFERED (and any other mode): every message answered as it comes; the body's answer carries the mutation.
// The response phase is watched in passing (first token, usage) and the request's admission is released when
// the response ends or the stream does, whichever comes first.
import type * as grpc from '@grpc/grpc-js';
import type { GatewayConfig } from '../config/index.js';
import { EarError, errorAnswer, errorCodeOf, type ErrorCode } from '../errors/errors.js';
import { StreamObserver } from '../upstream/stream-observer.js';
import { EndpointFilter, endpointList } from './endpoints.js';
import type { EppMetrics, EppOutcome } from './metrics.js';
import type { Dialect } from '../dialects/dialect.js';
import { dialectOfRequest, type AbortSignalLike, type EndpointPicker, type Picked } from './picker.js';
import type { ClientLimits } from '../request/client-gate.js';
import {
  BODY_CHUNK_BYTES, CONFORMANCE_SERVED, DESTINATION_ENDPOINT, DESTINATION_ENDPOINT_SERVED, DESTINATION_NAMESPACE, SUBSET_KEY, SUBSET_NAMESPACE,
  TEST_ENDPOINT_SELECTION, filterMetadata, headerRecord, namespacedMetadata, setHeader,
  type BodySendMode, type CommonResponse, type HttpBody, type HttpHeaders, type ProcessingRequest, type ProcessingResponse
} from './protocol.js';

export type ProcessCall = grpc.ServerDuplexStream<ProcessingRequest, ProcessingResponse>;

export interface StreamOptions {
  config: Readonly<GatewayConfig>;
  picker: EndpointPicker;
  metrics: EppMetrics;
  /** The body mode assumed when the proxy does not say (its protocol_config is from Envoy 1.33 on). */
  defaultMode: BodySendMode;
  log?: { warn (o: object, msg: string): void };
}

type Phase = 'request' | 'queued' | 'response' | 'done';

export class ExtProcStream {
  readonly #o: StreamOptions;
  readonly #call: ProcessCall;
  #requestMode: BodySendMode;
  #responseMode: BodySendMode;
  #observe = false;
  #phase: Phase = 'request';
  #headers = new Map<string, string>();
  /** When the request's headers arrived (a traced request's server span starts there). */
  #receivedAt = 0;
  #path = '';
  /** The API its :path names (null: not an inference call), read once with the headers. */
  #dialect: Dialect | null = null;
  #allowed: EndpointFilter | null = null;
  #conformance = false;
  readonly #body: Buffer[] = [];
  #bodyBytes = 0;
  #picked: Picked | null = null;
  /** The client's rate limits, when one applies: their headers go on whatever answers it (OpenAI's style). */
  #limits: ClientLimits | null = null;
  #observer: StreamObserver | null = null;
  #status = 0;
  readonly #signal: AbortSignalLike = { aborted: false, onAbort: null };
  /** Messages are handled one after another (a pick may wait for admission). */
  #chain: Promise<void> = Promise.resolve();
  #first = true;

  constructor (call: ProcessCall, opts: StreamOptions) {
    this.#o = opts;
    this.#call = call;
    this.#requestMode = opts.defaultMode;
    this.#responseMode = opts.defaultMode;
    call.on('data', (m: ProcessingRequest) => {
      this.#chain = this.#chain.then(() => this.#handle(m)).catch((err) => this.#fail(err));
    });
    // The proxy half-closed: no more messages. With the response body mode NONE that is how a response ends;
    // in any other mode, before the body's end, the exchange was abandoned (a client abort, a reset).
    call.on('end', () => {
      this.#chain = this.#chain.then(() => {
        if (this.#phase === 'response' && this.#status > 0 && this.#responseMode === 'NONE') this.#complete();
        else this.#close();
        if (!this.#call.cancelled) this.#call.end();
      });
    });
    call.on('cancelled', () => this.#close());
    call.on('error', () => this.#close());
  }

  #send (r: ProcessingResponse): void {
    if (this.#observe || this.#call.cancelled || this.#call.writableEnded) return;
    // Backpressure: stop reading the proxy until what was written drains.
    if (!this.#call.write(r)) {
      this.#call.pause();
      this.#call.once('drain', () => this.#call.resume());
    }
  }

  async #handle (m: ProcessingRequest): Promise<void> {
    if (this.#first) {
      this.#first = false;
      this.#observe = m.observability_mode === true;
      if (m.protocol_config) {
        this.#requestMode = m.protocol_config.request_body_mode ?? this.#requestMode;
        this.#responseMode = m.protocol_config.response_body_mode ?? this.#responseMode;
      }
    }
    if (this.#phase === 'done') return; // an immediate response ended the exchange
    switch (m.request) {
      case 'request_headers': return await this.#requestHeaders(m, m.request_headers ?? {});
      case 'request_body': return await this.#requestBody(m.request_body ?? {});
      case 'request_trailers':
        // A request with trailers ends its body with them: the body's last message had no end_of_stream.
        if (this.#phase === 'request') await this.#pick(Buffer.concat(this.#body, this.#bodyBytes), false);
        if ((this.#phase as Phase) !== 'done') this.#send({ request_trailers: {} });
        return;
      case 'response_headers': return this.#responseHeaders(m, m.response_headers ?? {});
      case 'response_body': return this.#responseBody(m.response_body ?? {});
      case 'response_trailers':
        this.#complete();
        return this.#send({ response_trailers: {} });
      default:
    }
  }

  async #requestHeaders (m: ProcessingRequest, h: HttpHeaders): Promise<void> {
    this.#receivedAt = performance.timeOrigin + performance.now();
    this.#headers = headerRecord(h);
    this.#path = this.#headers.get(':path') ?? '';
    this.#dialect = dialectOfRequest(this.#path);
    // The conformance suite's header names the endpoints to pick among, ahead of the subset hint (as GIE's test
    // picker reads them); either one present restricts the candidates, and an empty list leaves none.
    const test = this.#headers.get(TEST_ENDPOINT_SELECTION);
    if (test !== undefined && test.trim() !== '') {
      this.#conformance = true;
      this.#allowed = new EndpointFilter(endpointList(test));
    } else {
      const hint = filterMetadata(m, SUBSET_NAMESPACE);
      if (hint !== null && Object.hasOwn(hint, SUBSET_KEY)) this.#allowed = new EndpointFilter(endpointList(hint[SUBSET_KEY]));
    }
    if (h.end_of_stream === true) return await this.#pick(null);
    if (this.#requestMode !== 'FULL_DUPLEX_STREAMED') this.#send({ request_headers: { response: {} } });
  }

  async #requestBody (b: HttpBody): Promise<void> {
    if (this.#phase !== 'request') return;
    const chunk = b.body !== undefined ? Buffer.from(b.body.buffer, b.body.byteOffset, b.body.byteLength) : Buffer.alloc(0);
    this.#bodyBytes += chunk.length;
    if (this.#bodyBytes > this.#o.config.maxBodyBytes) {
      const err = new EarError('EAR_ERR_BODY_TOO_LARGE', `the request body is larger than ${this.#o.config.maxBodyBytes} bytes`);
      this.#o.picker.refused(this.#path, err);
      return this.#immediate(err, 'rejected');
    }
    if (chunk.length > 0) this.#body.push(chunk);
    if (b.end_of_stream === true) return await this.#pick(Buffer.concat(this.#body, this.#bodyBytes));
    if (this.#requestMode !== 'FULL_DUPLEX_STREAMED') this.#send({ request_body: { response: {} } });
  }

  /** Picks and answers; `bodyEnds`: the re-sent body ends the request (false when trailers follow). */
  async #pick (body: Buffer | null, bodyEnds = true): Promise<void> {
    this.#body.length = 0;
    this.#phase = 'queued';
    let picked: Picked | null;
    try {
      picked = await this.#o.picker.pick({
        path: this.#path, headers: this.#headers, body, allowed: this.#allowed, receivedAt: this.#receivedAt, limited: (l) => { this.#limits = l; }
      }, this.#signal);
    } catch (err) {
      return this.#immediate(err, outcomeOf(err));
    }
    if (picked === null) return; // the stream ended while it waited: counted as aborted there
    if (this.#signal.aborted) {
      picked.finish(null, false, 0, 'queued');
      return;
    }
    this.#picked = picked;
    this.#phase = 'response';
    this.#o.metrics.requests.inc({ outcome: picked.kind });
    const value = picked.endpoints.join(',');
    const set = [setHeader(DESTINATION_ENDPOINT, value)];
    // Tracing on: the engine's parent is EAR's span (as serve's upstream span is). Off: nothing set, Envoy sends
    // the client's own trace headers.
    const trace = picked.traceHeaders;
    if (trace !== null) for (const [k, v] of trace) set.push(setHeader(k, v));
    const common: CommonResponse = { header_mutation: { set_headers: set, ...(picked.removeHeaders.length > 0 ? { remove_headers: [...picked.removeHeaders] } : {}) }, clear_route_cache: true };
    const dynamic = namespacedMetadata(DESTINATION_NAMESPACE, { [DESTINATION_ENDPOINT]: value });
    if (body === null) {
      this.#send({ request_headers: { response: common }, dynamic_metadata: dynamic });
      return;
    }
    const out = picked.forward ?? body;
    // Envoy forwards a streamed (re-sent) or replaced body with the length the header says: say it (as GIE does).
    if (this.#requestMode === 'FULL_DUPLEX_STREAMED' || picked.forward !== null) common.header_mutation!.set_headers!.push(setHeader('content-length', String(out.length)));
    if (this.#requestMode === 'FULL_DUPLEX_STREAMED') {
      this.#send({ request_headers: { response: common }, dynamic_metadata: dynamic });
      this.#streamBody(out, bodyEnds, 'request_body');
      return;
    }
    if (picked.forward !== null) common.body_mutation = { body: picked.forward };
    this.#send({ request_body: { response: common }, dynamic_metadata: dynamic });
  }

  /** Sends `body` back as streamed mutations of at most BODY_CHUNK_BYTES, end_of_stream on the last if `eos`. */
  #streamBody (body: Buffer, eos: boolean, phase: 'request_body' | 'response_body'): void {
    let at = 0;
    do {
      const end = Math.min(body.length, at + BODY_CHUNK_BYTES);
      const piece = body.subarray(at, end);
      this.#send({ [phase]: { response: { body_mutation: { streamed_response: { body: piece, end_of_stream: eos && end === body.length } } } } });
      at = end;
    } while (at < body.length);
  }

  #responseHeaders (m: ProcessingRequest, h: HttpHeaders): void {
    const headers = headerRecord(h);
    this.#status = Number(headers.get(':status') ?? '0');
    const lb = filterMetadata(m, DESTINATION_NAMESPACE);
    const reported = lb !== null && typeof lb[DESTINATION_ENDPOINT_SERVED] === 'string' ? lb[DESTINATION_ENDPOINT_SERVED] as string : headers.get(DESTINATION_ENDPOINT_SERVED) ?? null;
    const served = reported === null || reported.trim() === '' ? null : reported.trim();
    const set = [];
    if (this.#picked !== null) {
      this.#o.metrics.served.inc({ kind: this.#picked.served(served) });
      this.#observer = new StreamObserver(headers.get('content-type') ?? '', this.#dialect?.stream);
      set.push(setHeader('x-ear-backend', this.#picked.backend.id));
    }
    if (this.#conformance && served !== null) set.push(setHeader(CONFORMANCE_SERVED, served));
    for (const [k, v] of this.#limitHeaders()) set.push(setHeader(k, v));
    this.#send({ response_headers: { response: set.length > 0 ? { header_mutation: { set_headers: set } } : {} } });
    if (h.end_of_stream === true) this.#complete();
  }

  #responseBody (b: HttpBody): void {
    const chunk = b.body !== undefined ? Buffer.from(b.body.buffer, b.body.byteOffset, b.body.byteLength) : Buffer.alloc(0);
    const eos = b.end_of_stream === true;
    if (this.#observer !== null && chunk.length > 0 && this.#observer.push(chunk)) this.#picked?.firstToken();
    if (this.#responseMode === 'FULL_DUPLEX_STREAMED') this.#streamBody(chunk, eos, 'response_body');
    else this.#send({ response_body: { response: {} } });
    if (eos) this.#complete();
  }

  /** The response ended: usage read, the request's record closed, admission released. */
  #complete (): void {
    if (this.#phase === 'done') return;
    this.#phase = 'done';
    const p = this.#picked;
    if (p === null) return;
    const obs = this.#observer;
    obs?.end();
    if (obs !== null && obs.firstTokenSeen) p.firstToken();
    p.finish(obs, this.#status >= 200 && this.#status < 300 && obs?.streamError == null, this.#status);
  }

  /** The stream ended (half-close, cancel, error): what is open is released, never held. */
  #close (): void {
    if (this.#phase === 'done') return;
    const phase = this.#phase;
    this.#phase = 'done';
    this.#signal.aborted = true;
    this.#signal.onAbort?.();
    this.#signal.onAbort = null;
    if (phase === 'response' || phase === 'queued') this.#o.metrics.aborts.inc({ phase });
    else if (this.#bodyBytes > 0 || this.#headers.size > 0) this.#o.metrics.aborts.inc({ phase: 'request' });
    if (phase === 'queued' || (phase === 'request' && this.#headers.size > 0)) this.#o.metrics.requests.inc({ outcome: 'aborted' });
    this.#picked?.finish(null, false, this.#status, 'response');
  }

  /** Answers the client directly (the error serve would answer, in the shape of the request's API) and ends the exchange. */
  #immediate (err: unknown, outcome: EppOutcome): void {
    this.#phase = 'done';
    this.#o.metrics.requests.inc({ outcome });
    const { status, body, headers } = errorAnswer(this.#dialect, err);
    const set = [...headers, ...this.#limitHeaders()].map(([k, v]) => setHeader(k, v));
    // Envoy's HttpStatus takes only the codes its enum defines: Anthropic's 529 (overloaded) goes as 503.
    this.#send({ immediate_response: { status: { code: status === 529 ? 503 : status }, headers: { set_headers: set }, body: Buffer.from(body), details: errorCodeOf(err) } });
  }

  /** The client's rate-limit headers as its limits stand now (none when no limit applies): x-ratelimit-*, and Anthropic's too for its API. */
  #limitHeaders (): Array<[string, string]> {
    if (this.#limits === null) return [];
    const openai = this.#limits.headers('openai', Date.now());
    return this.#dialect?.errors === 'anthropic' ? [...openai, ...this.#limits.headers('anthropic', Date.now())] : openai;
  }

  #fail (err: unknown): void {
    this.#o.log?.warn({ err: (err as Error)?.message }, 'ext_proc stream failed');
    if (this.#phase !== 'done' && this.#phase !== 'response') this.#immediate(err, 'error');
    this.#close();
  }
}

/** The outcome a refused pick counts as (ear_epp_requests_total); any other code is the request's own fault. */
const OUTCOME_BY_CODE: Partial<Record<ErrorCode, EppOutcome>> = {
  EAR_ERR_QUEUE_FULL: 'shed',
  EAR_ERR_RATE_LIMITED: 'rate_limited',
  EAR_ERR_NO_BACKEND: 'no_endpoint',
  EAR_ERR_QUEUE_TIMEOUT: 'queue_timeout',
  EAR_ERR_DRAINING: 'draining',
  EAR_ERR_INTERNAL: 'error'
};

function outcomeOf (err: unknown): EppOutcome {
  return OUTCOME_BY_CODE[errorCodeOf(err)] ?? 'rejected';
}
