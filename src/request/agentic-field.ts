// Phase 6's part of the body (docs/api.md#agent-hints): a client's `vllm_xargs.agentic_context` was stripped
// from the forwarded body (features/request-body.ts); a backend configured `agenticContext: forward` (a vLLM
// router whose program scheduling reads it) gets it back, as the client sent it. The body is parsed again for
// such a backend only: the field sits inside vllm_xargs, which may hold the client's other arguments.
import type { Backend } from '../fleet/backends.js';
import { reserialize } from '../features/request-body.js';
import type { RequestContext } from './context.js';

/** `body` with the client's agentic_context back in vllm_xargs for a backend that asks for it; else `body`. */
export function withAgenticContext (body: Buffer, ctx: RequestContext, b: Backend): Buffer {
  const context = ctx.features?.agenticContext;
  if (context === undefined || b.config.agenticContext !== 'forward') return body;
  const doc = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  const x = doc.vllm_xargs;
  doc.vllm_xargs = { ...(typeof x === 'object' && x !== null && !Array.isArray(x) ? x : {}), agentic_context: context };
  return reserialize(doc);
}
