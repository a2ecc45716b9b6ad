// Public surface of the tokenize subsystem.
export type { ChatMessage, ChatTemplate, ContentPart, RenderOptions, Tokenizer } from './types.js';
export { createTokenizer, createTokenizerSync, freezeTokenizer, thawTokenizer, TOKENIZER_NAMES, type FrozenTokenizer, type TokenizerOptions } from './registry.js';
export { createChatTemplate, BUILTIN_TEMPLATE_NAMES } from './builtin-templates.js';
export { JinjaChatTemplate, prepareMessages, toolDicts } from './chat-template.js';
export { TokenizeError } from './errors.js';
export { IncrementalTokenizer, type IncrementalOptions, type IncrementalResult, type IncrementalStats } from './incremental.js';
export { RemoteTokenizer, CircuitBreaker, remoteTokenizerUrl, REMOTE_TOKENIZER_DEFAULTS, type RemoteTokenizerOptions, type RemoteTokenizerStats } from './remote.js';
