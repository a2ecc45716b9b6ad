// Output text grown token by token at O(new tokens) per step, after vLLM's detokenize_incrementally: decode a
// short window before the new tokens and keep only what they add; a trailing U+FFFD (a character split across
// tokens) is held back until the tokens that complete it arrive, or until the end.
import type { Tokenizer } from '../tokenize/types.js';

export class IncrementalDetokenizer {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;
  text = '';

  constructor (private readonly tokenizer: Tokenizer) {}

  /** Appends tokens; returns the text they add now (possibly empty while a character is incomplete). */
  push (tokens: readonly number[], final: boolean): string {
    for (const t of tokens) this.ids.push(t);
    const prefix = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const full = this.tokenizer.decode(this.ids.slice(this.prefixOffset));
    if (full.length <= prefix.length || (!final && full.endsWith('\uFFFD'))) return '';
    const delta = full.slice(prefix.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.text += delta;
    return delta;
  }
}
