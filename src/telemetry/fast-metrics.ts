// Prometheus histograms and counters for the request path. A series is looked up once by its label values and
// kept; observe() is then a bucket search and three additions, inc() one addition, where prom-client builds a
// label object and hashes it to a string on every call (and keys histogram buckets by number-as-string): 3-4%
// of the gateway's main thread at 16k req/s. Both register in a prom-client Registry and export exactly what
// prom-client's Histogram and Counter would (same lines, same order).
import type { Registry } from 'prom-client';

export interface FastHistogramOptions {
  name: string;
  help: string;
  /** Upper bounds, ascending (+Inf is implied). */
  buckets: readonly number[];
  labelNames?: readonly string[];
  registers?: Registry[];
}

/** One label set's counts: per-bucket (not cumulative), then sum and count. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor (readonly bounds: readonly number[], readonly labels: Record<string, string>) {
    this.counts = new Float64Array(bounds.length);
  }

  observe (value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    if (i < b.length) this.counts[i]++;
    this.sum += value;
    this.count++;
  }
}

interface ExportValue {
  labels: Record<string, string | number>;
  value: number;
  /** A histogram's _bucket, _sum or _count line; absent: the metric's own name. */
  metricName?: string;
}

function labelObject (names: readonly string[], values: readonly string[], metric: string): Record<string, string> {
  if (values.length !== names.length) throw new Error(`${metric}: expected ${names.length} label values, got ${values.length}`);
  const labels: Record<string, string> = {};
  names.forEach((n, i) => { labels[n] = values[i]; });
  return labels;
}

interface MetricOptions {
  name: string;
  help: string;
  labelNames?: readonly string[];
  registers?: Registry[];
}

/** What both metric kinds share: series kept by label values, registration, reset and prom-client's get(). */
abstract class SeriesMetric<S extends { readonly labels: Record<string, string> }> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum';
  readonly labelNames: readonly string[];
  /**
   * Series by label values joined with NUL; bounded by what labels them (policies, routes, statuses, backend ids:
   * a backend that leaves has its series deleted, removeWhere).
   */
  protected readonly series = new Map<string, S>();
  readonly #create: (labels: Record<string, string>) => S;

  constructor (o: MetricOptions, create: (labels: Record<string, string>) => S) {
    this.name = o.name;
    this.help = o.help;
    this.labelNames = o.labelNames ?? [];
    this.#create = create;
    // An unlabelled metric exports zeros from the start, as prom-client's does.
    if (this.labelNames.length === 0) this.labels();
    for (const r of o.registers ?? []) r.registerMetric(this as never);
  }

  /** The series for these label values (in labelNames order): keep it and record on it. */
  labels (...values: string[]): S {
    const key = values.join('\0');
    let s = this.series.get(key);
    if (!s) this.series.set(key, s = this.#create(labelObject(this.labelNames, values, this.name)));
    return s;
  }

  reset (): void {
    this.series.clear();
    if (this.labelNames.length === 0) this.labels();
  }

  /**
   * Deletes every series whose label `name` is `value` (a backend that left: its series go from the export).
   * A series object kept by a caller still counts, but is no longer exported; labels() makes a new one.
   * Returns how many series it deleted.
   */
  removeWhere (name: string, value: string): number {
    let n = 0;
    for (const [key, s] of this.series) {
      if (s.labels[name] === value) {
        this.series.delete(key);
        n++;
      }
    }
    return n;
  }

  /** What prom-client's Registry reads to export a metric. */
  abstract getForPromString (): Promise<{ name: string; help: string; type: string; values: ExportValue[]; aggregator: string }>;

  get (): ReturnType<this['getForPromString']> {
    return this.getForPromString() as ReturnType<this['getForPromString']>;
  }
}

export class FastHistogram extends SeriesMetric<HistogramSeries> {
  readonly type = 'histogram';
  readonly #bounds: readonly number[];

  constructor (o: FastHistogramOptions) {
    const bounds = [...o.buckets];
    for (let i = 1; i < bounds.length; i++) if (!(bounds[i] > bounds[i - 1])) throw new RangeError(`${o.name}: buckets must ascend`);
    super(o, (labels) => new HistogramSeries(bounds, labels));
    this.#bounds = bounds;
  }

  /** Observes on the unlabelled series. */
  observe (value: number): void {
    this.labels().observe(value);
  }

  async getForPromString (): Promise<{ name: string; help: string; type: string; values: ExportValue[]; aggregator: string }> {
    const values: ExportValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let acc = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        acc += s.counts[i];
        values.push({ labels: { le: this.#bounds[i], ...s.labels }, value: acc, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: bucket });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export class CounterSeries {
  value = 0;

  constructor (readonly labels: Record<string, string>) {}

  inc (by = 1): void {
    if (!(by >= 0) || !Number.isFinite(by)) throw new Error(`It is not possible to decrease a counter (${by})`);
    this.value += by;
  }
}

export class FastCounter extends SeriesMetric<CounterSeries> {
  readonly type = 'counter';

  constructor (o: MetricOptions) {
    super(o, (labels) => new CounterSeries(labels));
  }

  /** Increments the unlabelled series. */
  inc (by = 1): void {
    this.labels().inc(by);
  }

  async getForPromString (): Promise<{ name: string; help: string; type: string; values: ExportValue[]; aggregator: string }> {
    const values = [...this.series.values()].map((s) => ({ labels: { ...s.labels }, value: s.value }));
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
