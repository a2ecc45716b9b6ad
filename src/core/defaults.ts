// Defaults that serving (the gateway's configuration, its threads, the session stores) and the lab (the eval
// drivers over the same routing host) must agree on: a number measured in the lab is a number of the code that
// serves only if both start from the same figures. One value each, here; a figure that only one side reads stays
// with that side, and a policy's knobs stay with the policy (policies/*.ts, read by both through the registry).
import type { SchedulerKind } from './admission.js';

/** Tokens per KV block: vLLM's default --block-size and the shipped profiles'. Precise mode needs the engines'. */
export const BLOCK_SIZE = 16;

/** A session idle this long ends (ms): its host binding, the route threads' turn state, a shared store's record. */
export const SESSION_IDLE_MS = 30 * 60_000;

/**
 * Keys the prefix index holds (a block for one group of 256 pod rows; at the bound CLOCK evicts): 16M tokens at 16 a
 * block, 256 MiB of slots. The most the region takes is 3 Mi (512 MiB of slots), with room left for the rest.
 */
export const PREFIX_INDEX_KEYS = 1 << 20;
export const PREFIX_INDEX_KEYS_MAX = 3 << 20;

/** Sessions the session table holds at once (its capacity in the shared region). */
export const MAX_SESSIONS = 1 << 16;
/**
 * How deep a request body's objects and arrays may nest (src/features/json-depth.ts): far past any tool schema or
 * tool input an agent sends, and far below what the recursive walks after the door (templates, json.dumps,
 * JSON.stringify, the engine's parser) overflow at.
 */
export const MAX_JSON_DEPTH = 256;
/** How long EAR remembers which engine produced a stored response (Responses API previous_response_id), in s. */
export const RESPONSE_ORIGIN_TTL_S = 24 * 3600;

/** Assumed presence lives this long when the index learns only from routing (approximate mode, ms). */
export const APPROXIMATE_ASSUMED_TTL_MS = 20 * 60_000;
/** ... and this long when engines publish KV events (precise mode): long enough to bridge the events' delay. */
export const PRECISE_ASSUMED_TTL_MS = 5000;

/**
 * The periodic upkeep (ms): the host's tick (admission timeouts, starvation promotion, releases) and the index
 * writer's expiry of assumed entries. The discrete-event driver does both on one virtual tick of this period.
 */
export const UPKEEP_EVERY_MS = 100;
/** Assumed entries one expiry pass looks at, at most (a bounded slice of the writer's time). */
export const ASSUMED_EXPIRY_BUDGET = 4096;
/**
 * Session-table slots one upkeep tick looks at for idle sessions past their TTL: 40,960 slots a second, a sweep of
 * the default table (131,072 slots) every 3.2 s and of the largest (2^25) every 14 min, whatever the request rate.
 */
export const SESSION_EXPIRY_BUDGET = 4096;

/** Engine-hash to EAR-key mappings kept per engine in precise mode; at the bound the oldest go. */
export const MAX_MAPPED_BLOCKS = 1 << 18;

/** Engines' /metrics (running, waiting, KV usage and capacity) reach the host this often (ms). */
export const METRICS_INTERVAL_MS = 1000;

/** ear-proactive: how often the migration thread looks for idle sessions on hot pods to move (ms). */
export const PROACTIVE_INTERVAL_MS = 1000;

/** The admission scheduler (admission.ts). */
export const SCHEDULER: SchedulerKind = 'atlas';

/** KV connectors the fleet offers (src/migration/cost.ts TRANSFER_MODES); recompute is always offered. */
export const KV_CONNECTORS = Object.freeze(['nixl', 'recompute'] as const);
