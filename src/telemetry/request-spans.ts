// A request's trace spans (tracing.ts), kept from the pipeline's events (src/request/channels.ts): the server span
// from start to done, ear.admission, ear.route per placement, ear.kv_transfer, and per attempt the CLIENT span whose
// context the engine gets (uWS) or, where another proxy sends the request (ext_proc), the response watched on the
// server span. Only subscribed when tracing is on.
import type { RequestContext } from '../request/context.js';
import type { Pipeline } from '../request/pipeline.js';
import { subscribeRequests } from '../request/channels.js';
import { routeFacts } from './route-facts.js';
import type { ProxiedTrace, RequestTrace, TransferTrace, Tracing, UpstreamTrace } from './tracing.js';
import { clientTraceHeaders } from '../upstream/traceparent.js';

interface Spans {
  span: RequestTrace;
  /** ext_proc: the response another proxy sends, watched on the server span. */
  watch: ProxiedTrace | null;
  upstream: UpstreamTrace | null;
  transfer: TransferTrace | null;
  sent: boolean;
}

export function subscribeRequestSpans (pipeline: Pipeline, tracing: Tracing): () => void {
  const spans = new WeakMap<RequestContext, Spans>();
  const policy = pipeline.policy;
  return subscribeRequests(pipeline, {
    start: ({ ctx }) => {
      // Envoy's headers are checked as serve's are before the span continues them.
      const h = ctx.via === 'ext_proc' ? clientTraceHeaders(ctx.traceparent, ctx.tracestate) : null;
      const span = tracing.request({
        path: ctx.route, via: ctx.via, startTime: ctx.startedAt, requestId: ctx.id,
        traceparent: h === null ? ctx.traceparent : h[0]?.[1] ?? '', tracestate: h === null ? ctx.tracestate : h[1]?.[1] ?? ''
      });
      spans.set(ctx, { span, watch: ctx.via === 'ext_proc' ? span.proxied() : null, upstream: null, transfer: null, sent: false });
    },
    features: ({ ctx }) => {
      const f = ctx.features!;
      spans.get(ctx)?.span.features(f.model, ctx.sessionId, f.promptTokens, f.blockKeys.length);
    },
    admitted: (m) => {
      const s = spans.get(m.ctx);
      s?.span.admission(m.ctx.priorityClass, m.submittedAt).end(m.outcome, m.waitMs, m.level, m.promoted);
    },
    routed: (m) => {
      const s = spans.get(m.ctx);
      // ext_proc: recorded when the endpoints are named (send), with the fallbacks.
      if (s === undefined || !s.span.recording || m.ctx.via === 'ext_proc') return;
      s.span.routed(routeFacts(policy, m.backends, m.placement, m.attempt, m.ctx.input!.model, m.ctx.exclude));
    },
    transferStart: (m) => {
      const s = spans.get(m.ctx);
      if (s === undefined) return;
      s.transfer = s.span.transfer(m.kind, m.source.id, m.target.id);
      m.headers = s.transfer.headers;
    },
    transferEnd: (m) => {
      const s = spans.get(m.ctx);
      s?.transfer?.end(m.transfer, m.servedBy.id);
      if (s !== undefined) s.transfer = null;
    },
    send: (m) => {
      const s = spans.get(m.ctx);
      if (s === undefined) return;
      const { ctx } = m;
      if (s.watch !== null) {
        if (s.span.recording) {
          s.span.routed({
            ...routeFacts(policy, pipeline.backends, ctx.placement!, m.attempt, ctx.input!.model, ctx.exclude),
            fallbacks: m.endpoints === null ? 0 : m.endpoints.length - 1, subsetHint: ctx.restricted
          });
        }
        m.headers = s.watch.headers;
        return;
      }
      s.upstream = s.span.upstream(m.backend.id, m.backend.config.url, m.attempt);
      m.headers = s.upstream.headers;
    },
    served: (m) => spans.get(m.ctx)?.watch?.served(m.endpoint, m.relation),
    firstToken: (m) => {
      const s = spans.get(m.ctx);
      const ttft = m.at - m.ctx.startedAt;
      if (s?.watch != null) s.watch.firstToken(ttft);
      else s?.upstream?.firstToken(ttft);
    },
    sent: (m) => {
      const s = spans.get(m.ctx);
      if (s === undefined) return;
      s.sent = true;
      const r = m.result.result;
      if (s.watch !== null) {
        if (m.result.usage !== null) s.watch.usage(m.result.usage);
        if (r.kind === 'aborted') s.watch.abandoned('response');
        return;
      }
      s.upstream?.end(r.kind, 'status' in r ? r.status : null, m.result.usage, 'error' in r ? r.error : null);
      s.upstream = null;
    },
    done: ({ ctx }) => {
      const s = spans.get(ctx);
      if (s === undefined) return;
      // ext_proc: the stream ended while the request waited for admission.
      if (s.watch !== null && ctx.outcome.aborted && !s.sent) s.watch.abandoned('queued');
      s.span.end(ctx.outcome.status, ctx.outcome.aborted, ctx.outcome.error);
      spans.delete(ctx);
    }
  });
}
