// Responses API continuations: a request naming `previous_response_id` must reach the engine that produced that
// response, because vLLM keeps stored responses in its own process memory (another engine answers 404). EAR
// records, for each response an engine produced, which backend it was (in the SessionStore: this process's
// bounded memory, or Redis that every replica reads), and pins a continuation to it. A response EAR never saw
// (produced before it started, or forgotten past the bound or the TTL) is routed as any request, and its engine
// answers as it would; one whose engine has left the fleet is answered as vLLM answers an unknown id.
import type { SessionStore } from '../store/session-store.js';
import type { Backend } from '../fleet/backends.js';
import { EarError } from '../errors/errors.js';
import type { RequestContext } from './context.js';

export interface ResponseOriginsOptions {
  store: SessionStore;
  /** How long an origin is kept (s): an agent's next turn comes within seconds, a resumed thread within a day. */
  ttlSeconds: number;
}

export class ResponseOrigins {
  readonly #store: SessionStore;
  readonly #ttl: number;

  constructor (o: ResponseOriginsOptions) {
    this.#store = o.store;
    this.#ttl = o.ttlSeconds;
  }

  /**
   * Pins `ctx` to the backend that produced its previous response: every other backend is excluded. Throws
   * EAR_ERR_RESPONSE_NOT_FOUND if that backend has left; does nothing for an id with no record (or a store that
   * does not answer: the request is routed as any other).
   */
  async pin (ctx: RequestContext, responseId: string, backends: readonly Backend[]): Promise<void> {
    const r = await this.#store.getResponseOrigin(responseId).catch(() => null);
    if (r === null || !r.ok || r.value === null) return;
    const origin = backends.find((b) => b.id === r.value && !b.gone && !b.draining);
    // vLLM's answer to an id it does not hold.
    if (origin === undefined) throw new EarError('EAR_ERR_RESPONSE_NOT_FOUND', `Response with id '${responseId}' not found.`);
    for (const b of backends) if (b !== origin) ctx.exclude.add(b.index);
  }

  /** `backend` produced (and stored) `responseId`. Not awaited: a store that is down counts it and drops it. */
  remember (responseId: string, backend: Backend): void {
    this.#store.setResponseOrigin(responseId, backend.id, this.#ttl).catch(() => {});
  }
}
