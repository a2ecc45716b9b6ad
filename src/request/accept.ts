// Accept (docs/architecture.md#accept), read once for every door: the uWS routes (`ear serve`, `ear epp`'s HTTP
// port, POST /v1/context) and Envoy's ext_proc. A door hands its request's headers as a getter (uWS's
// HttpRequest, valid only inside its handler: these run there; ext_proc's header map) and gets the client, or
// an EarError in the API's own terms. What a door does with the body (read it, bound it) stays the door's.
import type { GatewayConfig } from '../config/index.js';
import { EarError } from '../errors/errors.js';
import { contentCodings } from './body-encoding.js';
import { limitsOf, type AdmittedClient, type ClientGate, type ClientLimits, type GatedRoute } from './client-gate.js';
import { bearerToken, clientCredential } from './credentials.js';
import { priorityClassOf } from './priority.js';
import { sessionOf } from './session-id.js';

/** A request header by lower-case name, '' when absent. */
export type HeaderOf = (name: string) => string;

/** The credential the request presents, as an Authorization value (its own, or Anthropic's x-api-key). */
export function credentialOf (header: HeaderOf): string {
  return clientCredential(header('authorization'), header('x-api-key'));
}

/**
 * The client at the gate (client-gate.ts): its API key and request rate limit for `route`. `limited` hears the
 * client's limits when one applies, refused or not (its answers carry their headers). Throws the refusal: 401, 429.
 */
export function admitClient (gate: ClientGate, route: GatedRoute, auth: string, address: () => string, limited?: (limits: ClientLimits) => void): AdmittedClient {
  const answer = gate.admit(route, auth, address);
  const limits = limitsOf(answer);
  if (limits !== null) limited?.(limits);
  if (answer instanceof EarError) throw answer;
  return answer;
}

/** What the headers say of a request that enters the pipeline, besides its client. */
export interface RequestHead {
  /** Its priority class: x-ear-priority, else its API key's, else normal. */
  readonly priorityClass: number;
  /** Its body's content codings, in the order applied ([] when plain). */
  readonly codings: string[];
  readonly sessionId: string | null;
  readonly parentSessionId: string | null;
  /** The client's trace context ('' when absent). */
  readonly traceparent: string;
  readonly tracestate: string;
  /** Its API key may set the engine's `priority` itself (enginePriorityKeys). */
  readonly ownEnginePriority: boolean;
}

/**
 * The head of a request for the pipeline: priority, body coding, session and trace headers. `auth` is
 * credentialOf's. Throws 400 (a bad x-ear-priority), 415 (a content-encoding EAR cannot decode).
 */
export function readRequestHead (header: HeaderOf, auth: string, config: Pick<GatewayConfig, 'apiKeyPriority' | 'enginePriorityKeys'>): RequestHead {
  const apiKey = bearerToken(auth);
  const priorityClass = priorityClassOf(header('x-ear-priority'), apiKey, config.apiKeyPriority);
  const codings = contentCodings(header('content-encoding'));
  const { sessionId, parentSessionId } = sessionOf(header);
  const traceparent = header('traceparent');
  const tracestate = traceparent === '' ? '' : header('tracestate');
  return { priorityClass, codings, sessionId, parentSessionId, traceparent, tracestate, ownEnginePriority: apiKey !== null && config.enginePriorityKeys.includes(apiKey) };
}

/** The client's W3C trace context (tracestate only read with a traceparent). */
export function traceOf (header: HeaderOf): { traceparent: string; tracestate: string } {
  const traceparent = header('traceparent');
  return { traceparent, tracestate: traceparent === '' ? '' : header('tracestate') };
}
