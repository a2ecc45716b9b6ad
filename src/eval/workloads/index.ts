// Builds a workload from its command-line name: `agentic`, `claude-code:DIR`, `mooncake:FILE`, with options
// as the flags gave them (unknown ones are an error naming the workload and the options it takes).
import { agentic, AGENTIC_DEFAULTS } from './agentic.js';
import { claudeCode, CLAUDE_CODE_DEFAULTS } from './claude-code.js';
import { mooncake, MOONCAKE_DEFAULTS } from './mooncake.js';
import type { Workload } from './types.js';

export type { Workload, ClosedLoopWorkload, OpenLoopWorkload, Session, Turn, ChildLaunch, OpenRequest, PromptSpec, Arrival } from './types.js';
export { requestId, allSessions } from './types.js';
export { SessionPrompt, PromptSource, expandBlock, expandBlocks, TOKEN_MIN, TOKEN_SPAN } from './prompt-builder.js';
export { replay, type ReplayResult, type ReplayedRequest, type ServiceTime } from './replay.js';
export { workloadStats, type WorkloadStats } from './stats.js';
export { agentic, claudeCode, mooncake, AGENTIC_DEFAULTS, CLAUDE_CODE_DEFAULTS, MOONCAKE_DEFAULTS };

/** Checks option names against the defaults and coerces flag strings ("0.5", "true") to the defaults' types. */
function pick<T extends object> (what: string, defaults: Readonly<T>, options: Record<string, unknown>): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(options)) {
    if (!(k in defaults)) throw new Error(`workload ${what}: unknown option ${k} (known: ${Object.keys(defaults).join(', ')})`);
    const d = (defaults as Record<string, unknown>)[k];
    if (typeof v !== 'string' || typeof d === 'string') { out[k] = v; continue; }
    if (typeof d === 'boolean') {
      if (v !== 'true' && v !== 'false') throw new Error(`workload ${what}: ${k} must be true or false, got ${JSON.stringify(v)}`);
      out[k] = v === 'true';
    } else { // numbers, and the number-or-null options
      const n = Number(v);
      if (v.trim() === '' || !Number.isFinite(n)) throw new Error(`workload ${what}: ${k} must be a number, got ${JSON.stringify(v)}`);
      out[k] = n;
    }
  }
  return out as Partial<T>;
}

/** `spec` is `agentic`, `claude-code:DIR` or `mooncake:FILE`. */
export function loadWorkload (spec: string, options: Record<string, unknown> = {}): Workload {
  const colon = spec.indexOf(':');
  const kind = colon < 0 ? spec : spec.slice(0, colon);
  const arg = colon < 0 ? '' : spec.slice(colon + 1);
  switch (kind) {
    case 'agentic':
      if (arg !== '') throw new Error(`workload agentic takes no argument, got ${spec}`);
      return agentic(pick('agentic', AGENTIC_DEFAULTS, options));
    case 'claude-code':
      if (arg === '') throw new Error('workload claude-code needs a directory: claude-code:DIR');
      return claudeCode(arg, pick('claude-code', CLAUDE_CODE_DEFAULTS, options));
    case 'mooncake':
      if (arg === '') throw new Error('workload mooncake needs a file: mooncake:FILE');
      return mooncake(arg, pick('mooncake', MOONCAKE_DEFAULTS, options));
    default:
      throw new Error(`unknown workload ${JSON.stringify(kind)}: use agentic, claude-code:DIR or mooncake:FILE`);
  }
}
