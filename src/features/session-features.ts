// Per-session incremental features (issue 6 item 2): a turn whose messages extend the session's previous turn
// reuses the previous turn's tokens (IncrementalTokenizer) and the block keys of the blocks wholly inside the
// reused tokens, so it encodes and hashes only what is new. Keys are chained (key i is seeded with key i-1), so
// the kept keys plus the new blocks hashed from the last kept key equal a cold hash of the whole prompt.
//
// A chat body is parsed reusing the previous turn's parsed messages where its bytes are unchanged
// (body-splice.ts), and when the template renders message by message (RenderedPieces), the leading messages that
// are the same objects in the same context keep their text: only the rest is rendered into a tail that
// IncrementalTokenizer.encodeSuffix encodes after the kept prefix. So a turn's work is O(new text), not O(prompt).
//
// One instance per route worker (the pool sends a session's requests to the same worker). Bounds: the
// tokenizer's own (sessions, bytes) and at most `maxSessions` key lists of `maxKeyBytes` in all, least recently
// used evicted first; a session idle for `idleMs` (the gateway's session expiry) is dropped at the next turn of
// any session. An evicted or missing entry only costs a cold computation, never a wrong key.
import { copyKeys, type BlockHasher } from '../core/block-keys.js';
import { IncrementalTokenizer, type IncrementalStats, type SuffixResult } from '../tokenize/incremental.js';
import type { RenderedPieces } from '../tokenize/chat-template.js';
import type { ChatMessage, Tokenizer } from '../tokenize/types.js';
import { parseChatBody, type ChatBodyState } from './body-splice.js';
import { badJson, requestFromDoc, type ParsedRequest } from './request-body.js';

export interface SessionFeaturesOptions {
  maxSessions?: number;
  /** Bytes of token state (IncrementalTokenizer) over all sessions. Default 256 MiB. */
  maxTokenBytes?: number;
  /** Bytes of stored keys over all sessions (8 per block). Default 32 MiB. */
  maxKeyBytes?: number;
  /** Bytes of kept chat state over all sessions: request bodies and parsed messages (2 per char), for the next turn. Default 128 MiB. */
  maxChatBytes?: number;
  /** A session idle this long is forgotten (ms). Default 30 min. */
  idleMs?: number;
  /** Clock in ms. */
  now?: () => number;
}

interface KeyState {
  seed: bigint;
  blockSize: number;
  keys: BigUint64Array;
}

/** A session's last chat turn: its body, and its render when it was rendered in pieces. */
interface ChatState {
  body: ChatBodyState | null;
  render: RenderState | null;
  bytes: number;
}

interface RenderState {
  /** The IncrementalTokenizer turn this render was encoded as. */
  turn: number;
  messages: readonly ChatMessage[];
  contexts: readonly number[];
  /** Offset of each message's piece in the prompt, then of the end (n + 1 entries). */
  starts: number[];
}

export interface SessionFeaturesStats extends IncrementalStats {
  /** Chat messages taken parsed from the previous turn's body, and messages parsed. */
  reusedMessages: number;
  parsedMessages: number;
  /** Turns rendered and encoded from the first changed message on (encodeSuffix), not whole. */
  suffixTurns: number;
  /** Sessions whose chat state (body, render) was dropped at the maxChatBytes / maxSessions bound. */
  chatEvictions: number;
  /** Blocks whose keys were taken from the previous turn, and blocks hashed. */
  reusedBlocks: number;
  hashedBlocks: number;
  keyEvictions: number;
  /** Sessions dropped for being idle longer than idleMs. */
  expired: number;
}

export interface SessionTokensAndKeys {
  tokens: Uint32Array;
  /** A copy, owned by the caller. */
  keys: BigUint64Array;
}

export class SessionFeatures {
  readonly #inc: IncrementalTokenizer;
  readonly #keys = new Map<string, KeyState>(); // insertion order = LRU order
  readonly #chat = new Map<string, ChatState>(); // insertion order = LRU order
  readonly #maxChatBytes: number;
  #chatBytes = 0;
  readonly #maxSessions: number;
  readonly #maxKeyBytes: number;
  readonly #lastSeen = new Map<string, number>(); // insertion order = time order
  readonly #idleMs: number;
  readonly #now: () => number;
  #keyBytes = 0;
  #stats = { reusedBlocks: 0, hashedBlocks: 0, keyEvictions: 0, expired: 0, reusedMessages: 0, parsedMessages: 0, suffixTurns: 0, chatEvictions: 0 };

  constructor (tokenizer: Tokenizer, opts: SessionFeaturesOptions = {}) {
    this.#maxSessions = opts.maxSessions ?? 4096;
    this.#maxKeyBytes = opts.maxKeyBytes ?? 32 * 2 ** 20;
    this.#maxChatBytes = opts.maxChatBytes ?? 128 * 2 ** 20;
    this.#idleMs = opts.idleMs ?? 30 * 60_000;
    this.#now = opts.now ?? (() => performance.now());
    this.#inc = new IncrementalTokenizer(tokenizer, { maxSessions: this.#maxSessions, maxBytes: opts.maxTokenBytes ?? 256 * 2 ** 20 });
  }

  /** parseRequestBody for a chat body of this session, reusing the previous turn's parsed messages where the bytes allow. */
  parseChat (session: string, body: Buffer): ParsedRequest {
    const st = this.#chat.get(session);
    let r;
    try {
      r = parseChatBody(body, st?.body ?? null);
    } catch (err) {
      throw badJson(err);
    }
    this.#stats.reusedMessages += r.reused;
    this.#stats.parsedMessages += (r.state?.messages.length ?? r.reused) - r.reused;
    this.#storeChat(session, r.state, st?.render ?? null);
    return requestFromDoc('chat', body, r.doc);
  }

  /** Tokens and block keys of a rendered chat prompt (`text`, encoded without added special tokens). */
  tokensAndKeys (session: string, text: string, hasher: BlockHasher, blockSize: number, seed: bigint): SessionTokensAndKeys {
    this.#touch(session);
    return this.#withKeys(session, this.#inc.encodeText(session, text), hasher, blockSize, seed);
  }

  /**
   * tokensAndKeys for a chat rendered in pieces (`messages` as parsed, `pieces` their render): the leading
   * messages that are the previous turn's objects in the same context keep their text and tokens.
   */
  tokensAndKeysOfPieces (session: string, messages: readonly ChatMessage[], pieces: RenderedPieces, hasher: BlockHasher, blockSize: number, seed: bigint): SessionTokensAndKeys {
    this.#touch(session);
    const n = pieces.pieces.length;
    const prev = this.#chat.get(session)?.render ?? null;
    let r: SuffixResult | null = null;
    if (prev !== null) {
      const m = Math.min(n, prev.messages.length);
      let j = 0;
      while (j < m && messages[j] === prev.messages[j] && pieces.contexts[j] === prev.contexts[j]) j++;
      r = this.#inc.encodeSuffix(session, prev.turn, prev.starts[j], [...pieces.pieces.slice(j), pieces.end].join(''));
      if (r !== null) this.#stats.suffixTurns++;
    }
    r ??= this.#inc.encodeText(session, [...pieces.pieces, pieces.end].join(''));
    const starts = new Array<number>(n + 1);
    let at = 0;
    for (let i = 0; i < n; i++) {
      starts[i] = at;
      at += pieces.pieces[i].length;
    }
    starts[n] = at;
    this.#storeChat(session, this.#chat.get(session)?.body ?? null, { turn: r.turn, messages, contexts: pieces.contexts, starts });
    return this.#withKeys(session, r, hasher, blockSize, seed);
  }

  #withKeys (session: string, r: SuffixResult, hasher: BlockHasher, blockSize: number, seed: bigint): SessionTokensAndKeys {
    const prev = this.#keys.get(session);
    if (prev !== undefined) this.#drop(session, prev);
    const count = Math.floor(r.ids.length / blockSize);
    let kept = 0;
    if (prev !== undefined && prev.seed === seed && prev.blockSize === blockSize) {
      kept = Math.min(Math.floor(r.reusedTokens / blockSize), prev.keys.length, count);
    }
    const keys = new BigUint64Array(count);
    if (kept > 0) keys.set(prev!.keys.subarray(0, kept));
    if (count > kept) {
      const from = kept === 0 ? seed : keys[kept - 1];
      keys.set(hasher.hash(r.ids.subarray(kept * blockSize, count * blockSize), blockSize, from).keys, kept);
    }
    this.#stats.reusedBlocks += kept;
    this.#stats.hashedBlocks += count - kept;
    this.#store(session, { seed, blockSize, keys });
    return { tokens: r.ids, keys: copyKeys(keys) };
  }

  #storeChat (session: string, body: ChatBodyState | null, render: RenderState | null): void {
    const old = this.#chat.get(session);
    if (old !== undefined) {
      this.#chat.delete(session);
      this.#chatBytes -= old.bytes;
    }
    const s: ChatState = { body, render, bytes: (body?.bytes.buffer.byteLength ?? 0) + (render === null ? 0 : 2 * render.starts[render.starts.length - 1]) };
    if (s.bytes > this.#maxChatBytes) return;
    while (this.#chat.size >= this.#maxSessions || this.#chatBytes + s.bytes > this.#maxChatBytes) {
      const [oldest, o] = this.#chat.entries().next().value as [string, ChatState];
      this.#chat.delete(oldest);
      this.#chatBytes -= o.bytes;
      this.#stats.chatEvictions++;
    }
    this.#chat.set(session, s);
    this.#chatBytes += s.bytes;
  }

  /** Records the session's use and forgets sessions idle past idleMs (and, at the bound, the least recent). */
  #touch (session: string): void {
    const now = this.#now();
    this.#lastSeen.delete(session);
    for (const [id, at] of this.#lastSeen) {
      const idle = now - at >= this.#idleMs;
      if (!idle && this.#lastSeen.size < this.#maxSessions) break;
      this.forget(id);
      if (idle) this.#stats.expired++;
    }
    this.#lastSeen.set(session, now);
  }

  #store (session: string, s: KeyState): void {
    if (s.keys.byteLength > this.#maxKeyBytes) return;
    while (this.#keys.size >= this.#maxSessions || this.#keyBytes + s.keys.byteLength > this.#maxKeyBytes) {
      const [oldest, o] = this.#keys.entries().next().value as [string, KeyState];
      this.#drop(oldest, o);
      this.#stats.keyEvictions++;
    }
    this.#keys.set(session, s);
    this.#keyBytes += s.keys.byteLength;
  }

  #drop (session: string, s: KeyState): void {
    this.#keys.delete(session);
    this.#keyBytes -= s.keys.byteLength;
  }

  /** Drops a session's state (when the session ends). */
  forget (session: string): void {
    this.#lastSeen.delete(session);
    this.#inc.forget(session);
    const c = this.#chat.get(session);
    if (c !== undefined) {
      this.#chat.delete(session);
      this.#chatBytes -= c.bytes;
    }
    const s = this.#keys.get(session);
    if (s !== undefined) this.#drop(session, s);
  }

  stats (): SessionFeaturesStats {
    return { ...this.#inc.stats(), ...this.#stats };
  }
}
