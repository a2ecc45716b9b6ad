// The request path's Prometheus series, kept from the pipeline's events (src/request/channels.ts): the path itself
// counts nothing, and a request's status is counted once, when it is done.
import type { Pipeline } from '../request/pipeline.js';
import { subscribeRequests } from '../request/channels.js';
import type { AdmissionReport } from '../request/admission-wait.js';
import type { GatewayMetrics } from './metrics.js';

/** The scheduler's decision time, and the wait of a request that had to queue (those placed at once did not wait). */
function observeAdmission (metrics: GatewayMetrics, decisionSeconds: { observe (s: number): void }, r: AdmissionReport): void {
  if (r.submitSeconds !== null) decisionSeconds.observe(r.submitSeconds);
  if (r.outcome === 'released' && r.queued) metrics.admissionWait.labels(String(r.level)).observe(r.waitMs / 1000);
}

export function subscribeRequestMetrics (pipeline: Pipeline, metrics: GatewayMetrics): () => void {
  const decisionSeconds = metrics.decisionSeconds.labels(pipeline.policy);
  const policy = pipeline.policy;
  return subscribeRequests(pipeline, {
    features: (m) => metrics.featureSeconds.observe(m.seconds),
    admitted: (m) => observeAdmission(metrics, decisionSeconds, m),
    routed: (m) => {
      if (m.attempt > 0) metrics.retries.inc();
      if (m.decisionSeconds !== null) decisionSeconds.observe(m.decisionSeconds);
      metrics.backend(m.placement.backend.id).decisions(policy, m.placement.reason).inc();
    },
    sent: (m) => {
      const r = m.result.result;
      // Busy, not failed: no error is counted against it.
      if (r.kind === 'busy') metrics.upstreamBusy.inc({ backend: m.backend.id });
      else if (r.kind === 'retryable') metrics.upstreamErrors.inc({ backend: m.backend.id, kind: r.status === null ? 'connect' : 'status' });
      else if (r.kind === 'broken' || r.kind === 'cut') metrics.upstreamErrors.inc({ backend: m.backend.id, kind: 'midstream' });
    },
    resume: (m) => metrics.streamResumes.inc({ outcome: m.outcome }),
    firstToken: (m) => metrics.backend(m.backend.id).ttft.observe((m.at - m.ctx.startedAt) / 1000),
    done: (m) => {
      const { ctx } = m;
      const o = ctx.outcome;
      if (o.aborted) metrics.clientAborts.inc();
      if (o.status === 0) return;
      if (o.backend === '') {
        metrics.requests.labels(ctx.route, String(o.status), '').inc();
        return;
      }
      const series = metrics.backend(o.backend);
      series.requests(ctx.route, o.status).inc();
      series.e2e.observe((m.at - ctx.startedAt) / 1000);
      const out = ctx.usage?.completionTokens ?? ctx.contentEvents;
      if (ctx.firstTokenAt > 0 && out > 1) series.tpot.observe((m.at - ctx.firstTokenAt) / 1000 / (out - 1));
    }
  });
}
