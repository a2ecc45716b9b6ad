// The one error the KV-event decoder and frame parsers throw: whatever is wrong with the bytes an engine sent,
// the caller gets this (with a stable code) and can count and skip the message.
import { EarError } from '../errors/errors.js';

export class KvDecodeError extends EarError {
  constructor (message: string, options?: { cause?: unknown }) {
    super('EAR_ERR_KV_DECODE', message, options);
    this.name = 'KvDecodeError';
  }
}
