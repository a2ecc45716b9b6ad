// The secrets clients present: the admin token and client API keys. Neither is compared byte by byte: a
// comparison that stops at the first differing byte lets a client find a secret one byte at a time by timing.
// - The admin token: SHA-256 of what was presented against SHA-256 of the token, compared with
//   crypto.timingSafeEqual. Digests have a fixed length, so neither the token's bytes nor its length show.
// - API keys: a key is looked up by its HMAC under a secret drawn at start. The work done (one HMAC, one lookup
//   of a digest no client can predict) does not depend on how close a presented key is to a real one; the
//   digest is also the key's id in tables, metrics labels and routing (never the key itself).
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken (auth: string): string | null {
  return auth.startsWith('Bearer ') ? auth.slice(7).trim() : null;
}

/**
 * The credential a client presents, as an Authorization value: its own, or Anthropic's `x-api-key` (what Claude
 * Code sends with ANTHROPIC_API_KEY) as a bearer token. Neither is ever sent to an engine (upstream/headers.ts).
 */
export function clientCredential (authorization: string, xApiKey: string): string {
  if (authorization !== '' || xApiKey === '') return authorization;
  return `Bearer ${xApiKey.trim()}`;
}

const sha256 = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** The admin token (null: admin endpoints are off, every request to them is refused). */
export class AdminToken {
  #digest: Buffer | null = null;

  constructor (token: string | null) {
    this.replace(token);
  }

  /** The token from now on (a reload); null: no admin access. */
  replace (token: string | null): void {
    this.#digest = token === null ? null : sha256(token);
  }

  /** Whether an Authorization header carries the token. */
  matches (auth: string): boolean {
    // The digest is computed and compared whatever was presented (even nothing), so every refusal costs the same.
    // (The token is never empty: config refuses that, so '' for a missing header cannot match.)
    const presented = sha256(bearerToken(auth) ?? '');
    return this.#digest !== null && timingSafeEqual(presented, this.#digest);
  }
}

/** Client API keys (empty: no client authentication). */
export class ApiKeys {
  readonly #secret = randomBytes(32);
  /** HMAC(key) → the key's id. */
  readonly #ids = new Map<string, string>();

  constructor (keys: readonly string[]) {
    this.replace(keys);
  }

  /** The keys from now on (a reload); a key kept keeps its id (its user's fairness and buckets carry on). */
  replace (keys: readonly string[]): void {
    this.#ids.clear();
    for (const k of keys) {
      const d = this.#digest(k);
      this.#ids.set(d, `key:${d}`);
    }
  }

  get enabled (): boolean {
    return this.#ids.size > 0;
  }

  #digest (key: string): string {
    return createHmac('sha256', this.#secret).update(key, 'utf8').digest('base64url');
  }

  /** The id (`key:<digest>`) of a configured key, or null for any other string. */
  idOf (key: string): string | null {
    return this.#ids.get(this.#digest(key)) ?? null;
  }

  /** The id of the key an Authorization header carries, or null (no header, not Bearer, unknown key). */
  identify (auth: string): string | null {
    const key = bearerToken(auth);
    return key === null ? null : this.idOf(key);
  }
}
