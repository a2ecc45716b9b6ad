// Responses API continuations: a request naming `previous_response_id` must reach the engine that produced that
// response, because vLLM keeps stored responses in its own process memory (another engine answers 404). EAR
// records, for each response an engine produced, which backend it was and whose it is: the API key's user id,
// or ANONYMOUS_OWNER when no keys are configured (in the SessionStore: this process's bounded memory, or Redis
// that every replica reads), and pins a continuation to it.
//
// The engine checks no owner: whoever names an id it holds continues that conversation. So EAR answers a
// continuation as vLLM answers an unknown id (404 EAR_ERR_RESPONSE_NOT_FOUND) when the response is another
// client's, and, with API keys on, when EAR has no record of it (produced before it started, forgotten past the
// bound or the TTL): it cannot tell whose it is. With keys off every client is the same owner, and a response
// EAR never saw is routed as any request (its engine answers as it would). A response whose engine has left the
// fleet is answered 404 too.
import type { ResponseOrigin, SessionStore } from '../store/session-store.js';
import type { Backend } from '../fleet/backends.js';
import { EarError } from '../errors/errors.js';
import type { RequestContext } from './context.js';

/** The owner of responses made while no API keys are configured (a key's user id is `key:<digest>`). */
export const ANONYMOUS_OWNER = 'anonymous';

export interface ResponseOriginsOptions {
  store: Pick<SessionStore, 'getResponseOrigin' | 'setResponseOrigin'>;
  /** How long an origin is kept (s): an agent's next turn comes within seconds, a resumed thread within a day. */
  ttlSeconds: number;
}

/** Whose a request's responses are. */
export function ownerOf (ctx: Pick<RequestContext, 'keyUser'>): string {
  return ctx.keyUser ?? ANONYMOUS_OWNER;
}

export class ResponseOrigins {
  readonly #store: Pick<SessionStore, 'getResponseOrigin' | 'setResponseOrigin'>;
  readonly #ttl: number;

  constructor (o: ResponseOriginsOptions) {
    this.#store = o.store;
    this.#ttl = o.ttlSeconds;
  }

  /**
   * Pins `ctx` to the backend that produced its previous response: every other backend is excluded. Throws
   * EAR_ERR_RESPONSE_NOT_FOUND if the response is another client's, if that backend has left, or (API keys on)
   * if there is no record of it; EAR_ERR_STORE_UNAVAILABLE (API keys on) if the store does not answer. With keys
   * off, an id with no record (or a store that does not answer) is routed as any other request.
   */
  async pin (ctx: RequestContext, responseId: string, backends: readonly Backend[]): Promise<void> {
    const owner = ownerOf(ctx);
    const r: { ok: true; value: ResponseOrigin | null } | { ok: false } = await this.#store.getResponseOrigin(responseId).catch(() => ({ ok: false }));
    // vLLM's answer to an id it does not hold.
    const notFound = (): EarError => new EarError('EAR_ERR_RESPONSE_NOT_FOUND', `Response with id '${responseId}' not found.`);
    if (!r.ok) {
      if (owner === ANONYMOUS_OWNER) return;
      throw new EarError('EAR_ERR_STORE_UNAVAILABLE', 'previous_response_id cannot be checked: the session store does not answer; retry later', { retryAfterSeconds: 1 });
    }
    if (r.value === null) {
      if (owner === ANONYMOUS_OWNER) return;
      throw notFound();
    }
    if (r.value.owner !== owner) throw notFound();
    const origin = backends.find((b) => b.id === r.value!.backendId && !b.gone && !b.draining);
    if (origin === undefined) throw notFound();
    for (const b of backends) if (b !== origin) ctx.exclude.add(b.index);
  }

  /** `backend` produced (and stored) `responseId` for `owner`. Not awaited: a store that is down counts it and drops it. */
  remember (responseId: string, backend: Backend, owner: string): void {
    this.#store.setResponseOrigin(responseId, { backendId: backend.id, owner }, this.#ttl).catch(() => {});
  }
}
