// Templates EAR can render without jinja, recognised by their exact source, so a tokenizer that reads its
// template from the model's files (hf:qwen3) gets the direct renderer as well as the built-in name does.
import type { DirectRenderer } from './chat-template.js';
import { CHATML_TEMPLATE } from './templates/chatml.js';
import { renderChatmlDirect } from './templates/chatml-direct.js';
import { renderQwen3Direct } from './templates/qwen3-direct.js';
import { qwen3TokenizerConfig } from './qwen3-config.js';

let known: Map<string, DirectRenderer> | undefined;

/** The direct renderer of a template source, or null (then jinja renders it). */
export function directRendererFor (source: string): DirectRenderer | null {
  known ??= new Map<string, DirectRenderer>([
    [CHATML_TEMPLATE, renderChatmlDirect],
    [qwen3TokenizerConfig().chat_template as string, renderQwen3Direct]
  ]);
  return known.get(source) ?? null;
}
