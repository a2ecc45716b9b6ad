// A route parameter (an id in /v1/context/:id, /admin/sessions/:id) as the client meant it: percent-decoded.
// decodeURIComponent throws on malformed escapes ("%", "%E0%A4%A"); inside a uWS handler that throw took the
// whole gateway down (found by bench/fuzz.ts), so a malformed id is the client's mistake: a 400.
import { GatewayError } from './errors.js';

export function decodedParam (raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new GatewayError('EAR_ERR_BAD_REQUEST', `the id in the path is not valid percent-encoding: "${raw.slice(0, 64)}"`);
  }
}
