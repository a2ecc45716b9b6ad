// Envoy's side of an ext_proc stream, as Envoy's ext_proc filter plays it (no Envoy can be installed here): it
// sends the request's headers and body in the configured body mode, applies the picker's answer (the endpoint
// header, the re-sent body), sends the request itself to the endpoints in order over HTTP (falling back on a
// connection error, as Envoy's retry over the endpoint list does), and reports the response back phase by phase
// with the endpoint that served it. Every message the picker sent is kept for the tests to check.
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { externalProcessor, type ProcessingRequest, type ProcessingResponse, type PbStruct } from '../../src/epp/protocol.js';

export type Mode = 'FULL_DUPLEX_STREAMED' | 'BUFFERED';

/** The picker's messages as they arrive, awaited one by one. */
class Inbox {
  readonly #items: ProcessingResponse[] = [];
  readonly #waiting: Array<(m: ProcessingResponse | null) => void> = [];
  #ended = false;
  error: Error | null = null;

  push (m: ProcessingResponse | null): void {
    if (m === null) this.#ended = true;
    const w = this.#waiting.shift();
    if (w !== undefined) w(m);
    else if (m !== null) this.#items.push(m);
  }

  next (timeoutMs = 10_000): Promise<ProcessingResponse | null> {
    const m = this.#items.shift();
    if (m !== undefined) return Promise.resolve(m);
    if (this.#ended) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no message from the picker in time')), timeoutMs);
      this.#waiting.push((x) => { clearTimeout(t); resolve(x); });
    });
  }
}

export interface Exchange {
  /** Every message the picker sent, in order. */
  messages: ProcessingResponse[];
  /** The immediate response's status, if the picker answered one. */
  immediate: { status: number; body: string; headers: Record<string, string> } | null;
  /** x-gateway-destination-endpoint as the header mutation set it, and as the envoy.lb metadata said. */
  endpointHeader: string | null;
  endpointMetadata: string | null;
  /** Every header the picker's request-phase answer set. */
  requestHeaderMutation: Record<string, string>;
  /** Headers the picker's request-phase answer removed. */
  removedHeaders: string[];
  /** The request headers Envoy sent upstream (the client's, the picker's mutations applied). */
  upstreamHeaders: Record<string, string>;
  /** The request body Envoy would send upstream after the picker's answer. */
  forwardedBody: Buffer | null;
  /** Sizes of the streamed request-body chunks the picker sent back. */
  bodyChunkSizes: number[];
  /** The endpoint that served, the upstream status and the response body as the client got it. */
  served: string | null;
  status: number;
  responseBody: string;
  /** Headers the picker set on the response. */
  responseHeaders: Record<string, string>;
}

export interface ExchangeOptions {
  mode?: Mode;
  path?: string;
  headers?: Record<string, string>;
  body: Buffer | null;
  /** Size of the request body chunks sent (full duplex; Envoy forwards them as they come). */
  chunkBytes?: number;
  /** envoy.lb.subset_hint / x-gateway-destination-endpoint-subset: a list, or absent. */
  subset?: string[];
  /** Send no protocol_config (an Envoy before 1.33). */
  noProtocolConfig?: boolean;
  /** Called once the endpoints are known and before the upstream request (to kill an engine, say). */
  beforeUpstream?: (endpoints: string[]) => Promise<void> | void;
  /** Cancel the gRPC call after this many response-body chunks were sent (a client abort mid-stream). */
  abortAfterChunks?: number;
  /** Report no served endpoint in the response (as a proxy that does not implement it). */
  reportServed?: boolean;
  /** The response body mode (default: the request's): NONE sends the picker no response body at all. */
  responseMode?: Mode | 'NONE';
  /** Full duplex: the request ends with trailers (its last body message has no end_of_stream). */
  requestTrailers?: boolean;
  /** Cancels the gRPC call when this settles, whatever the phase (the exchange then rejects). */
  cancelWhen?: Promise<unknown>;
}

function headerMap (h: Record<string, string>): { headers: Array<{ key: string; raw_value: Buffer }> } {
  return { headers: Object.entries(h).map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) };
}

function struct (fields: Record<string, unknown>): PbStruct {
  const value = (v: unknown): unknown => Array.isArray(v) ? { listValue: { values: v.map(value) } } : typeof v === 'string' ? { stringValue: v } : { nullValue: 0 };
  return { fields: Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, value(v)])) } as PbStruct;
}

function setHeaders (m: ProcessingResponse, phase: 'request_headers' | 'request_body' | 'response_headers'): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of m[phase]?.response?.header_mutation?.set_headers ?? []) out[h.header.key] = Buffer.from(h.header.raw_value).toString();
  return out;
}

function removedHeaders (m: ProcessingResponse, phase: 'request_headers' | 'request_body'): string[] {
  return m[phase]?.response?.header_mutation?.remove_headers ?? [];
}

function metadataEndpoint (m: ProcessingResponse): string | null {
  const lb = m.dynamic_metadata?.fields?.['envoy.lb']?.structValue;
  return lb?.fields?.['x-gateway-destination-endpoint']?.stringValue ?? null;
}

export class EnvoySide {
  readonly #client: grpc.Client & { Process (): grpc.ClientDuplexStream<ProcessingRequest, ProcessingResponse> };

  constructor (address: string) {
    const Ctor = externalProcessor();
    this.#client = new Ctor(address, grpc.credentials.createInsecure()) as never;
  }

  close (): void {
    this.#client.close();
  }

  async exchange (o: ExchangeOptions): Promise<Exchange> {
    const mode = o.mode ?? 'FULL_DUPLEX_STREAMED';
    const path = o.path ?? '/v1/chat/completions';
    const call = this.#client.Process();
    const inbox = new Inbox();
    const x: Exchange = { messages: [], requestHeaderMutation: {}, removedHeaders: [], upstreamHeaders: {}, immediate: null, endpointHeader: null, endpointMetadata: null, forwardedBody: null, bodyChunkSizes: [], served: null, status: 0, responseBody: '', responseHeaders: {} };
    call.on('data', (m: ProcessingResponse) => { x.messages.push(m); inbox.push(m); });
    call.on('end', () => inbox.push(null));
    call.on('error', (err) => { inbox.error = err; inbox.push(null); });
    void o.cancelWhen?.then(() => call.cancel());
    const reqHeaders = { ':method': 'POST', ':path': path, ':authority': 'gateway.example', 'content-type': 'application/json', ...(o.headers ?? {}) };
    const first: ProcessingRequest = { request_headers: { headers: headerMap(reqHeaders), end_of_stream: o.body === null } } as ProcessingRequest;
    if (o.noProtocolConfig !== true) first.protocol_config = { request_body_mode: mode, response_body_mode: o.responseMode ?? mode };
    if (o.subset !== undefined) first.metadata_context = { filter_metadata: { 'envoy.lb.subset_hint': struct({ 'x-gateway-destination-endpoint-subset': o.subset }) } };
    call.write(first);

    // Request phase.
    const answered = (m: ProcessingResponse | null): boolean => {
      if (m === null) throw inbox.error ?? new Error('the picker ended the stream');
      if (m.immediate_response) {
        const ir = m.immediate_response as unknown as { status: { code: string | number }; body?: Buffer; headers?: { set_headers?: Array<{ header: { key: string; raw_value: Buffer } }> } };
        const headers: Record<string, string> = {};
        for (const h of ir.headers?.set_headers ?? []) headers[h.header.key] = Buffer.from(h.header.raw_value).toString();
        x.immediate = { status: statusCode(ir.status.code), body: Buffer.from(ir.body ?? []).toString(), headers };
        return true;
      }
      return false;
    };
    if (o.body === null) {
      const m = await inbox.next();
      if (answered(m)) return this.#end(call, inbox, x);
      x.requestHeaderMutation = setHeaders(m!, 'request_headers');
      x.removedHeaders = removedHeaders(m!, 'request_headers');
      x.endpointHeader = x.requestHeaderMutation['x-gateway-destination-endpoint'] ?? null;
      x.endpointMetadata = metadataEndpoint(m!);
    } else if (mode === 'BUFFERED') {
      const h = await inbox.next();
      if (answered(h)) return this.#end(call, inbox, x);
      assert.ok(h!.request_headers, 'BUFFERED: the headers are answered before the body is sent');
      call.write({ request_body: { body: o.body, end_of_stream: true } } as ProcessingRequest);
      const b = await inbox.next();
      if (answered(b)) return this.#end(call, inbox, x);
      assert.ok(b!.request_body, 'BUFFERED: the body is answered with a body response');
      x.requestHeaderMutation = setHeaders(b!, 'request_body');
      x.removedHeaders = removedHeaders(b!, 'request_body');
      x.endpointHeader = x.requestHeaderMutation['x-gateway-destination-endpoint'] ?? null;
      x.endpointMetadata = metadataEndpoint(b!);
      const replaced = (b!.request_body!.response?.body_mutation as { body?: Buffer } | undefined)?.body;
      x.forwardedBody = replaced !== undefined && replaced.length > 0 ? Buffer.from(replaced) : o.body;
    } else {
      // Full duplex: Envoy streams the body as it arrives, without waiting for any answer.
      const size = o.chunkBytes ?? 16_384;
      for (let at = 0; at < o.body.length || at === 0; at += size) {
        const end = Math.min(o.body.length, at + size);
        call.write({ request_body: { body: o.body.subarray(at, end), end_of_stream: end === o.body.length && o.requestTrailers !== true } } as ProcessingRequest);
        if (end === o.body.length) break;
      }
      if (o.requestTrailers === true) call.write({ request_trailers: { trailers: { headers: [] } } } as ProcessingRequest);
      const h = await inbox.next();
      if (answered(h)) return this.#end(call, inbox, x);
      assert.ok(h!.request_headers, 'FULL_DUPLEX_STREAMED: the headers response comes first');
      x.requestHeaderMutation = setHeaders(h!, 'request_headers');
      x.removedHeaders = removedHeaders(h!, 'request_headers');
      x.endpointHeader = x.requestHeaderMutation['x-gateway-destination-endpoint'] ?? null;
      x.endpointMetadata = metadataEndpoint(h!);
      const parts: Buffer[] = [];
      for (;;) {
        const m = await inbox.next();
        if (m?.request_trailers !== undefined && o.requestTrailers === true) break; // after the whole body
        const sr = (m?.request_body?.response?.body_mutation as { streamed_response?: { body?: Buffer; end_of_stream?: boolean } } | undefined)?.streamed_response;
        assert.ok(sr, 'FULL_DUPLEX_STREAMED: the body comes back as streamed mutations');
        const piece = Buffer.from(sr.body ?? []);
        x.bodyChunkSizes.push(piece.length);
        parts.push(piece);
        if (sr.end_of_stream === true) {
          assert.notEqual(o.requestTrailers, true, 'with trailers to come the body does not end the stream');
          break;
        }
      }
      x.forwardedBody = Buffer.concat(parts);
    }

    // Upstream: the endpoints in order, the next one on a connection error; the client's headers with the picker's
    // mutations applied, as Envoy sends them (content-length is the forwarded body's own).
    for (const [k, v] of Object.entries({ 'content-type': 'application/json', ...(o.headers ?? {}), ...x.requestHeaderMutation })) {
      if (k !== 'content-length' && !x.removedHeaders.includes(k)) x.upstreamHeaders[k] = v;
    }
    const endpoints = (x.endpointHeader ?? '').split(',').filter((e) => e !== '');
    await o.beforeUpstream?.(endpoints);
    let res: Awaited<ReturnType<typeof request>> | null = null;
    for (const ep of endpoints) {
      try {
        res = await request(`http://${ep}${path}`, { method: 'POST', headers: x.upstreamHeaders, body: x.forwardedBody ?? undefined });
        x.served = ep;
        break;
      } catch {
        // connection refused or reset: Envoy tries the next host of the list
      }
    }
    if (res === null) throw new Error(`no endpoint of "${x.endpointHeader}" answered`);
    x.status = res.statusCode;
    const respHeaders: Record<string, string> = { ':status': String(res.statusCode) };
    for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') respHeaders[k] = v;
    const rh: ProcessingRequest = { response_headers: { headers: headerMap(respHeaders), end_of_stream: false } } as ProcessingRequest;
    if (o.reportServed !== false) rh.metadata_context = { filter_metadata: { 'envoy.lb': struct({ 'x-gateway-destination-endpoint-served': x.served }) } };
    call.write(rh);
    const hr = await inbox.next();
    assert.ok(hr?.response_headers, 'the response headers are answered');
    x.responseHeaders = setHeaders(hr, 'response_headers');
    if (o.responseMode === 'NONE') {
      x.responseBody = await res.body.text();
      return this.#end(call, inbox, x);
    }

    // Response body: each chunk as it comes; in full duplex the picker sends it back.
    const out: Buffer[] = [];
    let sent = 0;
    const readBack = async (): Promise<void> => {
      const m = await inbox.next();
      if (mode === 'FULL_DUPLEX_STREAMED') {
        const sr = (m?.response_body?.response?.body_mutation as { streamed_response?: { body?: Buffer } } | undefined)?.streamed_response;
        assert.ok(sr, 'the response body comes back as streamed mutations');
        out.push(Buffer.from(sr.body ?? []));
      } else {
        assert.ok(m?.response_body, 'the response body is answered');
      }
    };
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) {
      const c = chunk as Buffer;
      chunks.push(c);
      if (mode === 'FULL_DUPLEX_STREAMED') {
        call.write({ response_body: { body: c, end_of_stream: false } } as ProcessingRequest);
        await readBack();
        sent++;
        if (o.abortAfterChunks !== undefined && sent >= o.abortAfterChunks) {
          res.body.destroy();
          call.cancel();
          x.responseBody = Buffer.concat(out).toString();
          return x;
        }
      }
    }
    const whole = Buffer.concat(chunks);
    call.write({ response_body: { body: mode === 'FULL_DUPLEX_STREAMED' ? Buffer.alloc(0) : whole, end_of_stream: true } } as ProcessingRequest);
    await readBack();
    x.responseBody = mode === 'FULL_DUPLEX_STREAMED' ? Buffer.concat(out).toString() : whole.toString();
    return this.#end(call, inbox, x);
  }

  async #end (call: grpc.ClientDuplexStream<ProcessingRequest, ProcessingResponse>, inbox: Inbox, x: Exchange): Promise<Exchange> {
    call.end();
    // The picker ends its side once Envoy's is closed.
    while (await inbox.next() !== null);
    return x;
  }
}

function statusCode (code: string | number): number {
  if (typeof code === 'number') return code;
  const named: Record<string, number> = { Unauthorized: 401, TooManyRequests: 429, ServiceUnavailable: 503, NotFound: 404, BadRequest: 400, PayloadTooLarge: 413, GatewayTimeout: 504, InternalServerError: 500, UnsupportedMediaType: 415 };
  return named[code] ?? Number(code);
}
