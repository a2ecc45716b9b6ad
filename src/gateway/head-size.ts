// The request head's bound (maxHeaderBytes). uWebSockets.js gives a handler no raw head, so its size is counted
// from what it parsed: the request line and each `name: value` line with their CRLFs. That is at most the bytes
// sent (optional whitespace is not counted), so a head the parser reassembles (≤ 4096 bytes) is never refused
// at the default bound. Heads the pinned parser drops before any handler runs: docs/security.md "Request heads".
import type { HttpRequest } from 'uWebSockets.js';
import { EarError } from '../errors/errors.js';

// ' HTTP/1.1\r\n' after the target, and the empty line that ends the head.
const LINE_ENDS = 11 + 2;

/** The head's size in bytes as counted above (UTF-16 units of what uWS decoded: never more than the bytes). */
export function headBytes (req: HttpRequest): number {
  const query = req.getQuery() ?? '';
  let n = req.getCaseSensitiveMethod().length + 1 + req.getUrl().length + (query === '' ? 0 : 1 + query.length) + LINE_ENDS;
  req.forEach((k, v) => { n += k.length + v.length + 4; });
  return n;
}

/** 431 for a head over `maxHeaderBytes`; null when it fits. */
export function headTooLarge (req: HttpRequest, maxHeaderBytes: number): EarError | null {
  const n = headBytes(req);
  return n > maxHeaderBytes ? new EarError('EAR_ERR_HEADERS_TOO_LARGE', `the request head is ${n} bytes, more than ${maxHeaderBytes}`) : null;
}
