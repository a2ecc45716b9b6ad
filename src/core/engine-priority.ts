// EAR's order, told to the engines (docs/architecture.md#send): a backend that honours request
// priorities gets, on each request, the integer its admission key maps to, and on each KV leg the most urgent one.
// Pure: the gateway's pipeline and the lab's des driver both call these, so the order measured is the order sent.
//
// The engines (their flags and polarity):
// - vllm: `--scheduling-policy priority`; the body's `priority`, default 0, lower runs first (vLLM V1's
//   PriorityRequestQueue orders its waiting queue by (priority, arrival)).
// - sglang: `--enable-priority-scheduling`; higher runs first.
// - sglang-low-first: the same with `--schedule-low-priority-values-first`: lower runs first.
//
// The mapping. An admission rank is (class, order): the class (0 high, 1 normal, 2 low: x-ear-priority or the
// API key) first, then the order inside it: the PLAS/ATLAS level, VTC's level of its counter above the least
// active one, 0 under fcfs or off. Its urgency is class · ORDER_SPAN + order (lower first), centred so that the
// normal class at order 0 — what EAR gives a request it knows nothing of — is the engine's default 0; the
// polarity then flips it for an engine that runs higher values first. A KV leg (a migration's export, a
// pre-warm, a P/D prefill leg, a /v1/context prefill) goes one step more urgent than any request, so it never
// waits behind the queue it is meant to bypass.
// With ORDER_SPAN 64 (the most levels the configuration allows) the values stay small and legible: on vLLM high
// is [-64, -1], normal [0, 63], low [64, 127], a leg -65. On SGLang the classes are 64 apart, past its default
// preemption threshold (10): an arrival of a better class (and a leg) may preempt a running request of a worse
// one there, while levels inside a class never do.
import { DEFAULT_CLASS, PRIORITY_CLASSES } from './admission.js';

export const ENGINE_PRIORITY_KINDS = ['vllm', 'sglang', 'sglang-low-first'] as const;
export type EnginePriorityKind = typeof ENGINE_PRIORITY_KINDS[number];

/** Orders inside a class: the most scheduler levels the configuration allows (config/admission.ts). */
export const ORDER_SPAN = 64;

/** Where admission put a request: its class (0 best) and its order inside it (0 best, < ORDER_SPAN). */
export interface AdmissionRank {
  readonly classRank: number;
  readonly order: number;
}

/** What EAR knows of a request it did not rank: the normal class, order 0 (maps to the engines' default 0). */
export const NEUTRAL_RANK: AdmissionRank = Object.freeze({ classRank: DEFAULT_CLASS, order: 0 });

/** Whether the engine runs lower values first. */
export function lowerFirst (kind: EnginePriorityKind): boolean {
  return kind !== 'sglang';
}

function clampInt (v: number, lo: number, hi: number): number {
  return Number.isFinite(v) ? Math.min(hi, Math.max(lo, Math.floor(v))) : hi;
}

/** The request's urgency, lower first, 0 for the neutral rank. */
function urgency (rank: AdmissionRank): number {
  const c = clampInt(rank.classRank, 0, PRIORITY_CLASSES.length - 1);
  return (c - DEFAULT_CLASS) * ORDER_SPAN + clampInt(rank.order, 0, ORDER_SPAN - 1);
}

function polar (kind: EnginePriorityKind, u: number): number {
  return lowerFirst(kind) ? u : (u === 0 ? 0 : -u); // no -0 on the wire
}

/** The integer a request of `rank` carries to an engine of `kind`. */
export function enginePriority (kind: EnginePriorityKind, rank: AdmissionRank): number {
  return polar(kind, urgency(rank));
}

/** The integer a KV leg carries: more urgent than any request's. */
export function urgentEnginePriority (kind: EnginePriorityKind): number {
  return polar(kind, -DEFAULT_CLASS * ORDER_SPAN - 1);
}

/** The engine priority to send, or null when the engine does not honour one (kind null) or the API has no field. */
export function priorityToSend (kind: EnginePriorityKind | null, takesPriority: boolean, rank: AdmissionRank | 'urgent'): number | null {
  if (kind === null || !takesPriority) return null;
  return rank === 'urgent' ? urgentEnginePriority(kind) : enginePriority(kind, rank);
}

/** Parses a backend's `priority` setting (flag, config, pod label); throws a message naming the values. */
export function parseEnginePriority (v: unknown): EnginePriorityKind | null {
  if (v === undefined || v === null || v === '' || v === 'off' || v === 'none') return null;
  if (typeof v === 'string' && (ENGINE_PRIORITY_KINDS as readonly string[]).includes(v)) return v as EnginePriorityKind;
  throw new RangeError(`must be one of ${ENGINE_PRIORITY_KINDS.join(', ')} or off`);
}
