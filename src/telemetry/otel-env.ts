// When EAR traces: read from the standard OTEL_* variables alone, before anything of OpenTelemetry is loaded.
// Tracing is off unless asked for, so an unconfigured gateway never imports the SDK (tracing.ts imports it
// dynamically). The rule:
// - OTEL_SDK_DISABLED=true: off, whatever else is set;
// - OTEL_TRACES_EXPORTER names exporters (otlp, console, zipkin): on; `none` alone: off;
// - else an OTLP endpoint for traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT): on,
//   with the SDK's default exporter (otlp, protocol from OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, http/protobuf by default);
// - else off.
// Everything else (service name, sampler, resource attributes, batch sizes, headers) is the SDK's to read.

export type Env = Readonly<Record<string, string | undefined>>;

export interface TracingDecision {
  enabled: boolean;
  /** Why, in words for the start-up log line. */
  reason: string;
}

function value (env: Env, name: string): string {
  return (env[name] ?? '').trim();
}

/** The exporters OTEL_TRACES_EXPORTER names (lower case, empty and `null` entries dropped, as the SDK does). */
export function tracesExporters (env: Env): string[] {
  return value(env, 'OTEL_TRACES_EXPORTER').toLowerCase().split(',').map((s) => s.trim()).filter((s) => s !== '' && s !== 'null');
}

export function tracingDecision (env: Env): TracingDecision {
  if (value(env, 'OTEL_SDK_DISABLED').toLowerCase() === 'true') return { enabled: false, reason: 'OTEL_SDK_DISABLED=true' };
  const exporters = tracesExporters(env);
  if (exporters.length > 0) {
    if (exporters.every((e) => e === 'none')) return { enabled: false, reason: 'OTEL_TRACES_EXPORTER=none' };
    return { enabled: true, reason: `OTEL_TRACES_EXPORTER=${exporters.join(',')}` };
  }
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT']) {
    if (value(env, name) !== '') return { enabled: true, reason: `${name} is set` };
  }
  return { enabled: false, reason: 'no OTEL_TRACES_EXPORTER or OTLP endpoint set' };
}
