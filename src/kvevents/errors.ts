// The one error the KV-event decoder and frame parsers throw: whatever is wrong with the bytes an engine sent,
// the caller gets this (with a stable code) and can count and skip the message.
export class KvDecodeError extends Error {
  readonly code = 'EAR_ERR_KV_DECODE';

  constructor (message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KvDecodeError';
  }
}
