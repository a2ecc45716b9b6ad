// The `remote:<URL>` tokenizer: the engine's own POST /tokenize (vLLM's, both body forms: `messages` for chat,
// `prompt` for completions), so block keys follow exactly the tokens the engine will see, whatever its template
// and tokenizer. The URL is configured (an engine, or a tokenizer service in front of the fleet), as production
// gateways do, rather than "the backend the request goes to": the tokens are needed to choose that backend.
//
// A remote call can fail, so each call has a timeout per attempt and bounded retries; a circuit breaker opens
// after `breakerFailures` failed calls in a row (no calls while open) and lets one probe through after
// `breakerCooldownMs` (half-open): success closes it, failure opens it again. Whenever the remote tokens are
// not had (failure, 4xx, breaker open) the prompt is tokenized locally with `character` and counted as a
// fallback: routing goes on, with keys that match only requests that fell back the same way.
import { request } from 'undici';
import type { ChatMessage, RenderOptions, Tokenizer } from './types.js';
import { TokenizeError } from './errors.js';

export interface RemoteTokenizerOptions {
  /** Per attempt, ms. */
  timeoutMs: number;
  /** Attempts after the first on a timeout, connection error or 5xx. */
  retries: number;
  /** Failed calls in a row that open the breaker. */
  breakerFailures: number;
  /** How long the breaker stays open before a probe, ms. */
  breakerCooldownMs: number;
}

export const REMOTE_TOKENIZER_DEFAULTS: Readonly<RemoteTokenizerOptions> = Object.freeze({
  timeoutMs: 1000,
  retries: 1,
  breakerFailures: 5,
  breakerCooldownMs: 10_000
});

export const REMOTE_PREFIX = 'remote:';

/** The engine base URL of a `remote:` tokenizer name, or null when the name is not one. Throws on a bad URL. */
export function remoteTokenizerUrl (name: string): string | null {
  if (!name.startsWith(REMOTE_PREFIX)) return null;
  const raw = name.slice(REMOTE_PREFIX.length);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `tokenizer "${name}": "${raw}" is not a URL (expected e.g. remote:http://10.0.0.5:8000)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `tokenizer "${name}": the URL must be http or https`);
  }
  return url.href.replace(/\/+$/, '');
}

export type BreakerState = 'closed' | 'open' | 'half-open';

export class CircuitBreaker {
  readonly #failures: number;
  readonly #cooldownMs: number;
  readonly #now: () => number;
  #inARow = 0;
  #openedAt = -1;
  #probing = false;
  /** Times it opened. */
  opened = 0;

  constructor (failures: number, cooldownMs: number, now: () => number = () => performance.now()) {
    this.#failures = failures;
    this.#cooldownMs = cooldownMs;
    this.#now = now;
  }

  get state (): BreakerState {
    if (this.#openedAt < 0) return 'closed';
    return this.#now() - this.#openedAt >= this.#cooldownMs ? 'half-open' : 'open';
  }

  /** Whether a call may go out now; in half-open, only one probe at a time. */
  allow (): boolean {
    const s = this.state;
    if (s === 'closed') return true;
    if (s === 'open' || this.#probing) return false;
    this.#probing = true;
    return true;
  }

  success (): void {
    this.#inARow = 0;
    this.#openedAt = -1;
    this.#probing = false;
  }

  failure (): void {
    this.#inARow++;
    if (this.#probing || this.#inARow >= this.#failures) {
      if (this.#openedAt < 0 || this.#probing) this.opened++;
      this.#openedAt = this.#now();
    }
    this.#probing = false;
  }
}

export interface RemoteTokenizerStats {
  calls: number;
  /** Attempts that failed (timeouts, connection errors, 5xx, malformed answers), retried or not. */
  failedAttempts: number;
  /** Calls answered locally with the fallback tokenizer, by reason. */
  fallbacks: number;
  fallbacksBreakerOpen: number;
  fallbacksRejected: number;
  fallbacksFailed: number;
  breakerOpened: number;
  breaker: BreakerState;
}

export interface RemoteTokens {
  ids: number[];
  /** True when the ids come from the fallback tokenizer. */
  fallback: boolean;
}

/** A call that got an answer the engine means (4xx): retrying will not change it, and the engine is healthy. */
class Rejected extends Error {}

export class RemoteTokenizer {
  readonly name: string;
  readonly url: string;
  readonly fallback: Tokenizer;
  readonly #opts: RemoteTokenizerOptions;
  readonly #breaker: CircuitBreaker;
  #stats = { calls: 0, failedAttempts: 0, fallbacksBreakerOpen: 0, fallbacksRejected: 0, fallbacksFailed: 0 };

  /** `fallback` is the `character` tokenizer in the gateway; its chat template renders chats that fall back. */
  constructor (name: string, fallback: Tokenizer, opts: Partial<RemoteTokenizerOptions> = {}, now?: () => number) {
    const url = remoteTokenizerUrl(name);
    if (url === null) throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `"${name}" is not a remote tokenizer name`);
    this.name = name;
    this.url = `${url}/tokenize`;
    this.fallback = fallback;
    this.#opts = { ...REMOTE_TOKENIZER_DEFAULTS, ...opts };
    this.#breaker = new CircuitBreaker(this.#opts.breakerFailures, this.#opts.breakerCooldownMs, now);
  }

  /** The engine's tokens of a chat (rendered by the engine's template), as for /v1/chat/completions. */
  encodeChat (model: string, messages: ChatMessage[], opts: RenderOptions): Promise<RemoteTokens> {
    const body = {
      model, messages, add_generation_prompt: opts.addGenerationPrompt, continue_final_message: opts.continueFinalMessage ?? false,
      tools: opts.tools, chat_template_kwargs: opts.chatTemplateKwargs, add_special_tokens: false
    };
    return this.#call(body, () => this.fallback.encode(this.fallback.chatTemplate.render(messages, opts), { addSpecialTokens: false }));
  }

  /** The engine's tokens of a completions prompt (special tokens added, as /v1/completions does). */
  encodePrompt (model: string, prompt: string): Promise<RemoteTokens> {
    return this.#call({ model, prompt, add_special_tokens: true }, () => this.fallback.encode(prompt));
  }

  async #call (body: Record<string, unknown>, local: () => number[]): Promise<RemoteTokens> {
    this.#stats.calls++;
    if (!this.#breaker.allow()) {
      this.#stats.fallbacksBreakerOpen++;
      return { ids: local(), fallback: true };
    }
    const payload = JSON.stringify(body);
    for (let attempt = 0; attempt <= this.#opts.retries; attempt++) {
      try {
        const ids = await this.#attempt(payload);
        this.#breaker.success();
        return { ids, fallback: false };
      } catch (err) {
        if (err instanceof Rejected) {
          // The engine is up and says no (e.g. messages its template rejects): the engine will answer the request itself.
          this.#breaker.success();
          this.#stats.fallbacksRejected++;
          return { ids: local(), fallback: true };
        }
        this.#stats.failedAttempts++;
      }
    }
    this.#breaker.failure();
    this.#stats.fallbacksFailed++;
    return { ids: local(), fallback: true };
  }

  async #attempt (payload: string): Promise<number[]> {
    const res = await request(this.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: payload,
      signal: AbortSignal.timeout(this.#opts.timeoutMs),
      headersTimeout: this.#opts.timeoutMs,
      bodyTimeout: this.#opts.timeoutMs
    });
    const text = await res.body.text();
    if (res.statusCode >= 400 && res.statusCode < 500) throw new Rejected(`HTTP ${res.statusCode}`);
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
    const tokens = (JSON.parse(text) as { tokens?: unknown }).tokens;
    if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && (t as number) >= 0 && (t as number) <= 0xffffffff)) {
      throw new Error('the answer has no valid "tokens" list');
    }
    return tokens as number[];
  }

  stats (): RemoteTokenizerStats {
    const s = this.#stats;
    return {
      ...s,
      fallbacks: s.fallbacksBreakerOpen + s.fallbacksRejected + s.fallbacksFailed,
      breakerOpened: this.#breaker.opened,
      breaker: this.#breaker.state
    };
  }
}
