// Envoy's ext_proc messages and the gRPC health protocol, loaded from the vendored protos (proto/README.md), with
// the few message shapes EAR reads and writes typed here. Decoded with proto-loader's defaults plus `oneofs`
// (a oneof's set field is named in a virtual property), enums as names, bytes as Buffers.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The protocol's names (docs/proposals/004-endpoint-picker-protocol of gateway-api-inference-extension). */
export const DESTINATION_ENDPOINT = 'x-gateway-destination-endpoint';
export const DESTINATION_ENDPOINT_SERVED = 'x-gateway-destination-endpoint-served';
export const DESTINATION_NAMESPACE = 'envoy.lb';
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint';
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset';
/** The conformance suite's test header (pick among these endpoints) and the header its result is reported in. */
export const TEST_ENDPOINT_SELECTION = 'test-epp-endpoint-selection';
export const CONFORMANCE_SERVED = 'x-conformance-test-served-endpoint';
/** Largest body chunk sent back in a streamed mutation: some proxies cap a chunk at 64 KiB (GIE's margin). */
export const BODY_CHUNK_BYTES = 62_000;
export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';

export type BodySendMode = 'NONE' | 'STREAMED' | 'BUFFERED' | 'BUFFERED_PARTIAL' | 'FULL_DUPLEX_STREAMED' | 'GRPC';

export interface HeaderValue { key: string; value?: string; raw_value?: Buffer | Uint8Array }
export interface HeaderMap { headers?: HeaderValue[] }
export interface HttpHeaders { headers?: HeaderMap | null; end_of_stream?: boolean }
export interface HttpBody { body?: Buffer | Uint8Array; end_of_stream?: boolean }

/**
 * google.protobuf.Value as decoded (the set kind named in `kind`). protobuf.js ships the well-known types with
 * camelCase field names, which keepCase leaves as they are.
 */
export interface PbValue {
  kind?: string;
  nullValue?: unknown;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: PbStruct;
  listValue?: { values?: PbValue[] };
}
export interface PbStruct { fields?: Record<string, PbValue> }

export interface ProcessingRequest {
  request?: 'request_headers' | 'response_headers' | 'request_body' | 'response_body' | 'request_trailers' | 'response_trailers';
  request_headers?: HttpHeaders | null;
  response_headers?: HttpHeaders | null;
  request_body?: HttpBody | null;
  response_body?: HttpBody | null;
  request_trailers?: unknown;
  response_trailers?: unknown;
  metadata_context?: { filter_metadata?: Record<string, PbStruct> } | null;
  observability_mode?: boolean;
  protocol_config?: { request_body_mode?: BodySendMode; response_body_mode?: BodySendMode; send_body_without_waiting_for_header_response?: boolean } | null;
}

export interface HeaderValueOption { header: { key: string; raw_value: Buffer }; append_action?: 'OVERWRITE_IF_EXISTS_OR_ADD' | 'APPEND_IF_EXISTS_OR_ADD' }
export interface HeaderMutation { set_headers?: HeaderValueOption[]; remove_headers?: string[] }
export interface CommonResponse {
  status?: 'CONTINUE' | 'CONTINUE_AND_REPLACE';
  header_mutation?: HeaderMutation;
  body_mutation?: { body?: Buffer } | { streamed_response: { body: Buffer; end_of_stream: boolean } };
  clear_route_cache?: boolean;
}
export interface ProcessingResponse {
  request_headers?: { response?: CommonResponse };
  response_headers?: { response?: CommonResponse };
  request_body?: { response?: CommonResponse };
  response_body?: { response?: CommonResponse };
  request_trailers?: Record<string, never>;
  response_trailers?: Record<string, never>;
  immediate_response?: { status: { code: number }; headers?: HeaderMutation; body?: Buffer; details?: string };
  dynamic_metadata?: PbStruct;
}

/** The package root (holds proto/): two levels above src/epp, or three above dist/src/epp. */
function protoRoot (): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'proto', 'envoy'))) return join(dir, 'proto');
    dir = dirname(dir);
  }
  throw new Error('the vendored protos (proto/) are missing from the package');
}

const LOADER_OPTIONS: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true };

let loaded: grpc.GrpcObject | null = null;

/** The loaded packages (envoy.service.ext_proc.v3, grpc.health.v1), once per process. */
export function protos (): grpc.GrpcObject {
  if (loaded === null) {
    const root = protoRoot();
    const def = protoLoader.loadSync(['envoy/service/ext_proc/v3/external_processor.proto', 'grpc/health/v1/health.proto'], { ...LOADER_OPTIONS, includeDirs: [root] });
    loaded = grpc.loadPackageDefinition(def);
  }
  return loaded;
}

function lookup (path: string): grpc.ServiceClientConstructor {
  let o: unknown = protos();
  for (const part of path.split('.')) o = (o as Record<string, unknown>)[part];
  if (typeof o !== 'function') throw new Error(`no service ${path} in the vendored protos`);
  return o as grpc.ServiceClientConstructor;
}

export const externalProcessor = (): grpc.ServiceClientConstructor => lookup(EXT_PROC_SERVICE);
export const healthService = (): grpc.ServiceClientConstructor => lookup('grpc.health.v1.Health');

/** A header's value: Envoy sends raw_value (bytes) to external processors, older ones value. */
export function headerValue (h: HeaderValue): string {
  if (h.raw_value !== undefined && h.raw_value.length > 0) return Buffer.from(h.raw_value).toString('utf8');
  return h.value ?? '';
}

/** Headers by lower-case name (the first value of a repeated header; HTTP/2 names are lower-case already). */
export function headerRecord (m: HttpHeaders | null | undefined, maxHeaders = 256): Map<string, string> {
  const out = new Map<string, string>();
  const list = m?.headers?.headers ?? [];
  for (let i = 0; i < list.length && i < maxHeaders; i++) {
    const k = list[i].key.toLowerCase();
    if (!out.has(k)) out.set(k, headerValue(list[i]));
  }
  return out;
}

export function setHeader (key: string, value: string): HeaderValueOption {
  return { header: { key, raw_value: Buffer.from(value) }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' };
}

/** A google.protobuf.Value as plain JS (structs as objects, lists as arrays). */
export function fromValue (v: PbValue | undefined): unknown {
  if (v === undefined || v === null) return null;
  switch (v.kind) {
    case 'stringValue': return v.stringValue;
    case 'numberValue': return v.numberValue;
    case 'boolValue': return v.boolValue;
    case 'structValue': return fromStruct(v.structValue);
    case 'listValue': return (v.listValue?.values ?? []).map(fromValue);
    default: return null;
  }
}

export function fromStruct (s: PbStruct | undefined | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = fromValue(v);
  return out;
}

/** A struct of string fields (the only kind the protocol's metadata needs). */
export function stringStruct (fields: Record<string, string>): PbStruct {
  const out: Record<string, PbValue> = {};
  for (const [k, v] of Object.entries(fields)) out[k] = { stringValue: v };
  return { fields: out };
}

/** dynamic_metadata { ns: { key: value } }. */
export function namespacedMetadata (ns: string, fields: Record<string, string>): PbStruct {
  return { fields: { [ns]: { structValue: stringStruct(fields) } } };
}

/** What the proxy put under `ns` in the request's metadata_context, as plain JS; null when absent. */
export function filterMetadata (req: ProcessingRequest, ns: string): Record<string, unknown> | null {
  const s = req.metadata_context?.filter_metadata?.[ns];
  return s === undefined ? null : fromStruct(s);
}
