// A session's prompts as the conversation an agent sends over a text API: a system prompt, then user and
// assistant messages alternating, the previous turn's answer as an assistant message. Built from the same
// token ids the token-id drivers send (TokenText gives their text), so that the prefix cache sees the reuse the
// workload describes:
// - the session's leading shared blocks (the workload's system + tool prompt, sharedPrefixBlocks) are the
//   system prompt; the rest of its first prompt is the first user message;
// - a turn that keeps every full block of the previous prompt (an agent's next turn: the trace re-hashes only the
//   previous prompt's cut last block) extends the previous conversation: the previous answer, then a user
//   message with the rest. The prompt grew by the answer and the tool results; the answer takes the growth's
//   first `outputTokens` positions (the streamed text when the driver has it, else the workload's own tokens at
//   those positions: a placeholder of the recorded length), the user message the rest. So a turn's rendered
//   prompt extends the previous one's, as Claude Code's and Codex's do;
// - a turn that keeps less (the trace diverged: a compaction, a rewritten history) keeps the messages that lie
//   wholly inside the kept tokens and puts everything after them in one user message (a kept user message is
//   reopened so that its text goes on with the new tokens); keeping less than the system prompt starts over.
// Pure: no I/O; one instance per session, bounded by its prompt.
import type { TokenText } from './token-text.js';

export type ConversationRole = 'system' | 'user' | 'assistant';

/** One message, and the positions of the workload prompt it stands for ([start, end) in token ids). */
export interface ConversationSegment {
  readonly role: ConversationRole;
  readonly text: string;
  readonly start: number;
  readonly end: number;
}

export interface ConversationTurn {
  /** The session's turn index (0 for its first prompt). */
  readonly turn: number;
  /** The system prompt, or null when the prompt starts with no shared block. */
  readonly system: string | null;
  /** user, assistant, user, …, user: never empty, never two of a role in a row. */
  readonly messages: readonly ConversationSegment[];
}

export class Conversation {
  readonly #text: TokenText;
  readonly #blockSize: number;
  readonly #shared: ReadonlySet<number>;
  #segments: ConversationSegment[] = [];
  /** The previous prompt's length in tokens, −1 before the first. */
  #length = -1;
  #turn = -1;
  /** The previous turn's recorded output length, and its streamed text when the driver reported it. */
  #outputTokens = 0;
  #answer: string | null = null;

  constructor (text: TokenText, blockSize: number, sharedPrefixBlocks: ReadonlySet<number>) {
    if (!(Number.isInteger(blockSize) && blockSize > 0)) throw new RangeError(`block size must be an integer > 0, got ${blockSize}`);
    this.#text = text;
    this.#blockSize = blockSize;
    this.#shared = sharedPrefixBlocks;
  }

  /**
   * The conversation of the session's next prompt: `tokens` and `blocks` as SessionPrompt.advance returned them,
   * `keepBlocks` the turn's spec's, `outputTokens` what this turn is asked to produce.
   */
  advance (tokens: Uint32Array, blocks: readonly number[], keepBlocks: number, outputTokens: number): ConversationTurn {
    const n = tokens.length;
    if (n === 0) throw new RangeError('a prompt has at least one token');
    const bs = this.#blockSize;
    const prev = this.#length;
    let segments: ConversationSegment[] | null = null;
    if (prev >= 0 && keepBlocks * bs >= Math.floor(prev / bs) * bs) segments = this.#extend(tokens);
    if (segments === null && prev >= 0) segments = this.#reopen(tokens, Math.min(keepBlocks * bs, prev));
    this.#segments = segments ?? this.#first(tokens, blocks);
    this.#length = n;
    this.#turn++;
    this.#outputTokens = outputTokens;
    this.#answer = null;
    const first = this.#segments[0];
    return {
      turn: this.#turn,
      system: first.role === 'system' ? first.text : null,
      messages: first.role === 'system' ? this.#segments.slice(1) : this.#segments.slice()
    };
  }

  /** The answer of turn `turn` as streamed: the next turn's assistant message (ignored once that turn is built). */
  answered (turn: number, text: string): void {
    if (turn === this.#turn && text !== '') this.#answer = text;
  }

  /** The previous conversation, its answer and a user message with the rest; null when the prompt did not grow. */
  #extend (tokens: Uint32Array): ConversationSegment[] | null {
    const prev = this.#length;
    const n = tokens.length;
    if (n <= prev) return null;
    const answerEnd = prev + Math.max(0, Math.min(this.#outputTokens, n - prev - 1));
    const answer = this.#answer ?? this.#text.text(tokens, prev, answerEnd);
    if (answer === '') return null;
    return [
      ...this.#segments,
      { role: 'assistant', text: answer, start: prev, end: answerEnd },
      { role: 'user', text: this.#text.text(tokens, answerEnd, n), start: answerEnd, end: n }
    ];
  }

  /** The messages wholly inside the `kept` leading tokens, then one user message to the end; null to start over. */
  #reopen (tokens: Uint32Array, kept: number): ConversationSegment[] | null {
    const out: ConversationSegment[] = [];
    for (const s of this.#segments) {
      if (s.end > kept) break;
      out.push(s);
    }
    if (out.length > 0 && out[out.length - 1].role === 'user') out.pop();
    if (out.length === 0) return null;
    const from = out[out.length - 1].end;
    if (from >= tokens.length) return null;
    out.push({ role: 'user', text: this.#text.text(tokens, from), start: from, end: tokens.length });
    return out;
  }

  /** A first prompt: its leading shared blocks as the system prompt (leaving the user at least one token). */
  #first (tokens: Uint32Array, blocks: readonly number[]): ConversationSegment[] {
    let shared = 0;
    while (shared < blocks.length && this.#shared.has(blocks[shared])) shared++;
    const system = Math.min(shared * this.#blockSize, tokens.length - 1);
    const out: ConversationSegment[] = [];
    if (system > 0) out.push({ role: 'system', text: this.#text.text(tokens, 0, system), start: 0, end: system });
    out.push({ role: 'user', text: this.#text.text(tokens, system), start: system, end: tokens.length });
    return out;
  }
}
