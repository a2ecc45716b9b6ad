// The KV-event codec in one import: encode (simulator, tests) and decode (gateway) of vLLM/SGLang batches.
export { encodeBatch, type EncodeOptions } from './encode.js';
export { digestToU64 } from './hash.js';
export { decodeBatch, MAX_PAYLOAD_BYTES, type DecodedBatch } from './decode.js';
export { KvDecodeError } from './errors.js';
