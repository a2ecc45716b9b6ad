// Part of phase 2 (features): the agent's hints (src/dialects/request-hints.ts) mapped onto what EAR already
// has. The program is the session when no header named one, its parent the parent session (ATLAS's critical
// path, PLAS's shared service); vLLM router's priority (larger first) moves a request out of the default class
// (above 0: high, below: low; an x-ear-priority header or an API key's class stays); the expected output
// length is admission's and the policies' expected output; the deadline ranks the request in admission
// (src/core/admission-control.ts); the retention TTL is clamped to the gateway's maximum (config
// maxRetentionTtlMs) and published on `done` with the turn's end (request/channels.ts) for the routing core.
import { DEFAULT_CLASS } from '../core/admission.js';
import type { RequestHints, RetentionSource } from '../dialects/request-hints.js';
import type { RequestContext } from './context.js';

/** The hints as the request carries them, on the pipeline's clock: the deadline as a time, retention apart. */
export type AgentHints = Omit<RequestHints, 'deadlineSeconds' | 'retentionTtlMs' | 'retentionSource'> & {
  /** When (pipeline clock, ms) the program wants this step served; null: no deadline. */
  deadlineAt: number | null;
};

/** How long the session's prefix is to be kept after this turn, and who asked. */
export interface Retention {
  /** ms, clamped to maxRetentionTtlMs; null for `tool-gap` (the routing core knows the session's learnt gap). */
  ttlMs: number | null;
  source: RetentionSource;
}

/** Priority classes: 0 high, 1 normal, 2 low. */
const HIGH = 0;
const LOW = 2;

/** Takes the features' hints into the context (called once, when the features are known). */
export function applyHints (ctx: RequestContext): void {
  const h = ctx.features?.hints ?? null;
  if (h === null) return;
  ctx.hints = {
    programId: h.programId,
    taskId: h.taskId,
    parentProgramId: h.parentProgramId,
    rootProgramId: h.rootProgramId,
    blocksParent: h.blocksParent,
    priority: h.priority,
    deadlineAt: h.deadlineSeconds === null ? null : ctx.startedAt + h.deadlineSeconds * 1000,
    expectedOutputTokens: h.expectedOutputTokens
  };
  // A request that leaves no KV (count_tokens) has no session to name, nor a prefix to keep.
  if (!ctx.dialect.fillsCache) return;
  if (h.retentionTtlMs !== null && h.retentionSource !== null) {
    ctx.retention = { ttlMs: Math.min(h.retentionTtlMs, ctx.pipeline.maxRetentionTtlMs), source: h.retentionSource };
  }
  if (ctx.sessionId === null && h.programId !== null) ctx.sessionId = h.programId;
  if (ctx.parentSessionId === null && h.parentProgramId !== null) ctx.parentSessionId = h.parentProgramId;
  if (ctx.priorityClass === DEFAULT_CLASS && h.priority !== 0) ctx.priorityClass = h.priority > 0 ? HIGH : LOW;
}

/** The turn is over: a turn that ended in a tool call with no hint of its own is retained for the tool gap. */
export function settleRetention (ctx: RequestContext): void {
  if (ctx.retention === null && ctx.outcome.toolCall && ctx.sessionId !== null) ctx.retention = { ttlMs: null, source: 'tool-gap' };
}
