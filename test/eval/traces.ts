// Where the shared public traces live: ../shared/traces from the repository root (never copied into it).
import { fileURLToPath } from 'node:url';

/** dist/test/eval/traces.js → <repo>/../shared/traces/ */
export const TRACES = fileURLToPath(new URL('../../../../shared/traces/', import.meta.url));
export const CLAUDE_CODE_DIR = `${TRACES}claude-code`;
export const MOONCAKE_CONVERSATION = `${TRACES}mooncake/conversation_trace.jsonl`;
export const MOONCAKE_SYNTHETIC = `${TRACES}mooncake/synthetic_trace.jsonl`;
