// What the request path publishes (node:diagnostics_channel, as undici does): metrics and traces subscribe, so the
// phases carry no telemetry code and a request's status is counted in one place (`done`). Channels are the
// process's; a subscriber keeps to its own pipeline's requests (`ctx.pipeline`). Messages are published
// synchronously: a subscriber may fill the fields a message marks as its answer (trace headers for the engine).
import diagnostics from 'node:diagnostics_channel';
import type { Backend } from '../fleet/backends.js';
import type { Placement } from '../fleet/routing-port.js';
import type { TransferFacts } from './kv-transfer-step.js';
import type { TraceHeaders } from '../upstream/traceparent.js';
import type { RequestContext } from './context.js';
import type { SendResult } from './transport.js';
import type { AdmissionReport } from './admission-wait.js';
import type { ResumeMessage } from './resume.js';
import type { Retention } from './hints.js';

/** The request was taken in (its body read): nothing decided yet. */
export interface StartMessage { ctx: RequestContext }
/** Its features are known (ctx.features); `seconds` they took. */
export interface FeaturesMessage { ctx: RequestContext; seconds: number }
/**
 * Admission let it go (`released`; ctx.placement is set) or refused it: the scheduler's own time, the time it
 * queued, the level it left from (admission-wait.ts).
 */
export type AdmittedMessage = { ctx: RequestContext } & AdmissionReport;
/** A placement was made: the first (attempt 0) or a retry, or a move to the backend the proxy reports serving. */
export interface RoutedMessage { ctx: RequestContext; placement: Placement; attempt: number; decisionSeconds: number | null; backends: readonly Backend[] }
/** A KV transfer's source leg starts (`headers`: a subscriber's answer, the trace context the legs carry). */
export interface TransferStartMessage { ctx: RequestContext; kind: 'migration' | 'pd'; source: Backend; target: Backend; headers: TraceHeaders | undefined }
/** It ended (`kind` as at its start): what it did, and the backend the request goes to (its source if it failed). */
export interface TransferEndMessage { ctx: RequestContext; kind: 'migration' | 'pd'; transfer: TransferFacts; servedBy: Backend }
/**
 * An attempt is about to be sent to `backend`. `headers`: the trace headers the engine gets; the client's own by
 * default, a subscriber's answer when tracing is on.
 */
export interface SendMessage { ctx: RequestContext; backend: Backend; attempt: number; endpoints: readonly string[] | null; headers: TraceHeaders }
/** The attempt's answer (retryable, busy and broken ones too). */
export interface SentMessage { ctx: RequestContext; backend: Backend; result: SendResult }
/** The proxy (ext_proc) reported which endpoint served: how it relates to the ones named. */
export interface ServedMessage { ctx: RequestContext; endpoint: string | null; relation: 'primary' | 'fallback' | 'unlisted' | 'unreported' }
export interface FirstTokenMessage { ctx: RequestContext; at: number; backend: Backend }
/** It was answered with an error (ctx.outcome.error), before `done`. */
export interface ErrorMessage { ctx: RequestContext; error: unknown }
/**
 * It ended, whatever the outcome (ctx.outcome): published once per request. `toolCall`: its answer ended in a
 * tool call; `retention`: how long its session's prefix is to be kept (a hint's TTL, or the tool gap), for the
 * routing core to hold it on its engine.
 */
export interface DoneMessage { ctx: RequestContext; at: number; toolCall: boolean; retention: Retention | null }

/** Each event's message. */
export interface RequestMessages {
  start: StartMessage;
  features: FeaturesMessage;
  admitted: AdmittedMessage;
  routed: RoutedMessage;
  transferStart: TransferStartMessage;
  transferEnd: TransferEndMessage;
  send: SendMessage;
  sent: SentMessage;
  served: ServedMessage;
  firstToken: FirstTokenMessage;
  error: ErrorMessage;
  resume: ResumeMessage;
  done: DoneMessage;
}

const NAMES: Readonly<Record<keyof RequestMessages, string>> = {
  start: 'start', features: 'features', admitted: 'admitted', routed: 'routed', transferStart: 'transfer-start', transferEnd: 'transfer-end',
  send: 'send', sent: 'sent', served: 'served', firstToken: 'first-token', error: 'error', resume: 'resume', done: 'done'
};

/** The channels, `ear:request:<name>`. */
export const channels = Object.fromEntries(Object.entries(NAMES).map(([k, name]) => [k, diagnostics.channel(`ear:request:${name}`)])) as
  Readonly<Record<keyof RequestMessages, diagnostics.Channel>>;

export type RequestEvents = { [K in keyof RequestMessages]?: (m: RequestMessages[K]) => void };

/**
 * Subscribes `handlers` to the events of `pipeline`'s requests (others in the process are skipped). Returns the
 * unsubscribe.
 */
export function subscribeRequests (pipeline: object, handlers: RequestEvents): () => void {
  const subs: Array<[diagnostics.Channel, (m: unknown) => void]> = [];
  for (const name of Object.keys(handlers) as Array<keyof RequestEvents>) {
    const h = handlers[name] as ((m: { ctx: RequestContext }) => void) | undefined;
    if (h === undefined) continue;
    const fn = (m: unknown): void => {
      if ((m as { ctx: RequestContext }).ctx.pipeline === pipeline) h(m as { ctx: RequestContext });
    };
    channels[name].subscribe(fn);
    subs.push([channels[name], fn]);
  }
  return () => { for (const [c, fn] of subs) c.unsubscribe(fn); };
}
