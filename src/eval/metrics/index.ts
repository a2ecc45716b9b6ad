export { MetricsCollector, type CollectorOptions, type SentRequest, type FinishedRequest, type Migration, type MetricsSummary } from './collector.js';
export { MIGRATION_MODES, type MigrationMode, type MigrationSummary, type MigrationAccuracy } from './migrations.js';
export { couplingAmplification, serviceShare, couplingOf, arrivalRate, type CouplingSummary } from './coupling.js';
export { idealMakespan, amplification } from './amplification.js';
export { ApcBound } from './apc-bound.js';
export { failureCause, HttpStatusError } from './failure-cause.js';
export { Latency, percentile, type LatencySummary } from './latency.js';
