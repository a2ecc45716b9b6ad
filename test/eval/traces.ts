// The trace samples the workload reader tests use: test/fixtures/traces in this repository (small cuts of the
// public traces, with their licences; see the README there), so a clone tests itself with nothing beside it.
import { fileURLToPath } from 'node:url';

/** dist/test/eval/traces.js → <repo>/test/fixtures/traces/ (the compiled suites run from dist, the data stays put) */
export const TRACES = fileURLToPath(new URL('../../../test/fixtures/traces/', import.meta.url));
export const CLAUDE_CODE_DIR = `${TRACES}claude-code`;
export const MOONCAKE_CONVERSATION = `${TRACES}mooncake/conversation_trace.head400.jsonl`;
export const MOONCAKE_SYNTHETIC = `${TRACES}mooncake/synthetic_trace.head200.jsonl`;
