// The messages between a data-plane thread (httpThreads ≥ 2) and the main thread, the owner of every decision
// (docs/architecture.md#n-data-plane-threads). A data-plane thread accepts, reads the body, computes features,
// proxies and streams; what it needs decided or recorded it sends here: the client at the gate, the decision's
// inputs (submit, a retry's route), the attempt's start, first token and end, the token charge and its
// correction, a Responses continuation's origin; with a shared session store, the shared records it adopts into
// the session table and the local figures it asks of it (the store itself it talks to with a client of its own). The owner sends back the answers, and the backend list each time
// it changes. One MessagePort per thread (its parentPort): messages arrive in the order they were sent, so a
// backend is always known to a thread before a placement names it. Each side sends what one turn of its event
// loop made as one batch (threads/batched-port.ts: one postMessage, an array in the order posted), and a
// request's block keys go through shared memory (the thread's key ring, asm/key-ring.ts), not the message.
import type { BackendConfig } from '../config/index.js';
import type { SharedRegion } from '../core/region.js';
import type { AdmissionRank } from '../core/engine-priority.js';
import type { Usage } from '../upstream/stream-observer.js';
import type { RateLimitState } from '../request/rate-limit-headers.js';
import type { GatedRoute } from '../request/client-gate.js';
import type { ResponseOrigin, SharedSession } from '../store/session-store.js';
import type { GatewayConfig } from '../config/index.js';
import type { Retain } from '../fleet/routing-port.js';
import type { HostRequest } from '../core/routing-host.js';
import type { FrozenTokenizer } from '../tokenize/index.js';

/** What a data-plane thread starts with. */
export interface HttpThreadData {
  /** 1…N, for its logs and its per-thread series. */
  thread: number;
  config: Readonly<GatewayConfig>;
  shared: SharedRegion;
  /** The port to listen on (the first thread's, once it has one: all listen on one port). */
  port: number;
  /** The owner's loopback listener, where the routes a data-plane thread does not serve itself are handed. */
  ownerPort: number;
  /** Route pool threads of its own (the process's routeThreads shared among the data-plane threads). */
  routeThreads: number;
  /** The tokenizer's tables, which its route threads share with every other (freezeTokenizer). */
  frozenTokenizer: FrozenTokenizer | null;
  /** How long its own shared store client may wait to connect before it listens (0: the main thread's found it down). */
  storeWaitMs: number;
}

/** A backend as the owner sees it, for a thread's copy (its own upstream pool is made from `config`). */
export interface BackendWire {
  index: number;
  config: BackendConfig;
  health: 'unknown' | 'healthy' | 'unhealthy';
  draining: boolean;
  models: string[];
  maxModelLen: Array<[string, number]>;
}

/** A placement the owner made and keeps until the thread says it finished (`pid`, per thread). */
export interface PlacementWire {
  pid: number;
  index: number;
  backendId: string;
  reason: string;
  expectedPrefill: number;
  matchedBlocks?: number;
  decidedAt: number;
  dispatchedAt?: number;
  transferFrom: number | null;
  migrating?: boolean;
  rank?: AdmissionRank;
}

/**
 * The request as routing takes it (a Set does not cross, its members do). Its block keys are in the thread's key
 * ring (`keysAt`, `keysN`; asm/key-ring.ts), or, when the ring had no room or the thread has none, in `blockKeys`.
 */
export type InputWire = Omit<HostRequest, 'exclude' | 'blockKeys'> & { exclude?: number[]; blockKeys?: BigUint64Array; keysAt?: number; keysN?: number };

/** An error as it crosses: an EarError's code and retry, a refusal's limits, a no-candidate's filter. */
export interface ErrorWire {
  code: string;
  message: string;
  retryAfterSeconds?: number | null;
  /** A rate limit's refusal: the client's limits (its answer's headers). */
  limits?: LimitsWire;
  /** NoCandidateError's filter. */
  filter?: string | null;
  queueFull?: boolean;
  noCandidate?: boolean;
}

/** A client's limits as the owner holds them (`lid` names them for the charge and its correction). */
export interface LimitsWire {
  lid: number;
  limitsTokens: boolean;
  state: RateLimitState;
}

/** Thread → owner. `id`: answered under it. */
export type ToOwner =
  | { t: 'listening'; port: number; keyRing: number | null }
  | { t: 'gate'; id: number; route: GatedRoute; auth: string; address: string }
  | { t: 'submit'; id: number; input: InputWire; priorityClass: number }
  | { t: 'cancel'; id: number }
  | { t: 'route'; id: number; input: InputWire; exclude: number[]; attempt: number }
  | { t: 'started'; pid: number }
  | { t: 'firstToken'; pid: number }
  /** `at`: when the thread saw it end (its clock is the main thread's: performance.timeOrigin is the process's). */
  | { t: 'finished'; pid: number; at: number; usage: Usage | null; ok: boolean; retain?: Retain }
  | { t: 'migrationEnded'; id: number; pid: number; ok: boolean }
  | { t: 'charge'; id: number; lid: number; cost: number }
  | { t: 'settle'; lid: number; used: number | null }
  | { t: 'forget'; lid: number }
  | { t: 'originGet'; id: number; responseId: string }
  | { t: 'originSet'; responseId: string; origin: ResponseOrigin; ttlSeconds: number }
  | { t: 'sessionCompleted'; sessionId: string; model: string; path: string; body: Uint8Array }
  /** A shared store's record into the session table (RoutingHost.adoptShared), before the thread's next decision. */
  | { t: 'adopt'; sessionId: string; session: SharedSession }
  /** The session's figures in the session table (store/shared-sessions.ts LocalFigures), answered null if absent. */
  | { t: 'sessionFigures'; id: number; sessionId: string }
  | { t: 'metrics'; id: number; json: unknown }
  | { t: 'drained' };

/**
 * What a thread's batch holds: messages, and its reports on each attempt as plain numbers (measured: an object
 * with a string tag costs more to clone and to read than the bookkeeping it carries). A report is a code,
 * `pid * 4 + kind`; a started report (a retry's: the owner starts a first placement itself) is followed by the time
 * the thread started it; a finished report by 5 numbers: the time the thread saw it end, ok (1 or 0), then the
 * usage's prompt, completion and cached tokens (−1: the usage, or its cached count, is unknown). With the thread's
 * times the owner counts an attempt's service (the session's attained service) as the thread, and a shared store,
 * see it, without the messages' lag. A record is never split between batches. A finished report with a retention
 * goes as the object message.
 */
export type ToOwnerItem = ToOwner | number | string | null;
/**
 * A submit as a record, `id * 4 + SUBMIT_RECORD`, then SUBMIT_FIELDS values: model, session, parent session,
 * prompt tokens, max tokens, user, the keys' place and count in the key ring (0, 0: none), expected output tokens,
 * deadline, priority class (null where the request has none). A submit whose keys are not in the ring, or that
 * excludes backends, goes as the object message.
 */
export const SUBMIT_RECORD = 0;
export const SUBMIT_FIELDS = 11;
export const REPORT_STARTED = 1;
export const REPORT_FIRST_TOKEN = 2;
export const REPORT_FINISHED = 3;
/** Numbers after a started report's code. */
export const STARTED_FIELDS = 1;
/** Numbers after a finished report's code. */
export const FINISHED_FIELDS = 5;

/**
 * What the owner's batch holds: messages, and each release of a submitted request as plain numbers (the owner's
 * most frequent message; measured, as the reports above: an object's clone costs more than its fields). A release
 * is a code, `id * 4 + ANSWER_RELEASED`, followed by RELEASED_FIELDS values: the placement's pid, backend row,
 * expected prefill, matched blocks (−1: unknown), decided at, dispatched at (−1: not yet), the row it transfers from
 * (−1: none), flags (RELEASED_*), wait ms, level, the rank's class and order (when RELEASED_RANK), and its reason (the
 * one string). A record is never split between batches. The row names the backend: the owner pushes its list in
 * the same ordered batches whenever it changes (before any placement on a new backend), so the thread's copy holds
 * the row's backend of the moment.
 */
export type ToThreadItem = ToThread | number | string;
export const ANSWER_RELEASED = 1;
export const RELEASED_FIELDS = 13;
export const RELEASED_QUEUED = 1;
export const RELEASED_MIGRATING = 2;
export const RELEASED_PROMOTED = 4;
export const RELEASED_RANK = 8;

/** Owner → thread. */
export type ToThread =
  | { t: 'backends'; list: BackendWire[] }
  /** Whether the gate is open (no API keys, no per-IP limit): then a thread asks it nothing. Sent at start and on each change. */
  | { t: 'gateOpen'; open: boolean }
  | { t: 'answer'; id: number; ok: true; value: unknown }
  | { t: 'answer'; id: number; ok: false; error: ErrorWire }
  | { t: 'dropped'; id: number; reason: string }
  | { t: 'metrics'; id: number }
  | { t: 'drain' }
  | { t: 'stop' };
