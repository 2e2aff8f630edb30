import { Gauge, type Registry } from 'prom-client';

/** One label set's counts: per bucket (the last is +Inf), not cumulative. */
interface Series<L extends string> {
  labels: Record<L, string | number>;
  counts: Float64Array;
  sum: number;
  count: number;
}

/** Label sets by their values, one level per label name; the last level holds the series. */
type Levels<L extends string> = Map<string | number, Levels<L> | Series<L>>;

/**
 * A Prometheus histogram for what every request observes (the request latency, the editor's
 * answer time). prom-client's Histogram validates, copies and hashes the labels on every
 * observation: two of them per proxied request cost a tenth of the proxy's CPU per request
 * (bench/proxy.ts). This one finds its label set by one Map lookup per label value (no key is
 * built: the values a request observes are constants, whose hashes V8 keeps) and counts the value
 * into its bucket. It registers in prom-client's registries and is exported exactly as
 * prom-client's Histogram is (`_bucket` with `le` first, `_sum`, `_count`).
 */
export class RequestHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly labelNames: readonly L[];
  private readonly upperBounds: readonly number[];
  private readonly levels: Levels<L> = new Map();
  /** Every series, in the order first observed (for the export). */
  private readonly series: Series<L>[] = [];

  constructor(options: { name: string; help: string; labelNames: readonly L[]; buckets: readonly number[]; registers: Registry[] }) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.upperBounds = options.buckets.toSorted((a, b) => a - b);
    for (const registry of options.registers) registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** Counts `value` (seconds) for the label set `labels` (every label of labelNames). */
  observe(labels: Record<L, string | number>, value: number): void {
    const series = this.seriesOf(labels);
    let bucket = 0;
    while (bucket < this.upperBounds.length && value > this.upperBounds[bucket]!) bucket++;
    series.counts[bucket]!++;
    series.sum += value;
    series.count++;
  }

  private seriesOf(labels: Record<L, string | number>): Series<L> {
    let level = this.levels;
    const last = this.labelNames.length - 1;
    for (let i = 0; i < last; i++) {
      const value = labels[this.labelNames[i]!];
      let next = level.get(value) as Levels<L> | undefined;
      if (!next) level.set(value, (next = new Map()));
      level = next;
    }
    const value = labels[this.labelNames[last]!];
    let series = level.get(value) as Series<L> | undefined;
    if (!series) {
      const own = {} as Record<L, string | number>;
      for (const name of this.labelNames) own[name] = labels[name];
      series = { labels: own, counts: new Float64Array(this.upperBounds.length + 1), sum: 0, count: 0 };
      level.set(value, series);
      this.series.push(series);
    }
    return series;
  }

  /** Starts timing; the returned function observes the seconds since, with the labels given here and there, and returns them. */
  startTimer(labels: Partial<Record<L, string | number>> = {}): (end?: Partial<Record<L, string | number>>) => number {
    const started = performance.now();
    return (end = {}) => {
      const seconds = (performance.now() - started) / 1000;
      this.observe({ ...labels, ...end } as Record<L, string | number>, seconds);
      return seconds;
    };
  }

  /** The metric as prom-client's registry formats it. */
  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: object[] }> {
    const values: object[] = [];
    for (const { labels, counts, sum, count } of this.series) {
      let cumulative = 0;
      this.upperBounds.forEach((bound, i) => {
        cumulative += counts[i]!;
        values.push({ labels: { le: bound }, sharedLabels: labels, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: labels, value: count, metricName: `${this.name}_bucket` });
      values.push({ labels: {}, sharedLabels: labels, value: sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: labels, value: count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Forgets every observation (prom-client's registry calls it on resetMetrics). */
  reset(): void {
    this.levels.clear();
    this.series.length = 0;
  }
}

/** The `status_class` label of an HTTP status (`2xx`), one constant string per class. */
export function statusClass(status: number): string {
  return STATUS_CLASSES[Math.floor(status / 100)] ?? `${Math.floor(status / 100)}xx`;
}

const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/**
 * A Prometheus gauge of what is under way (`http_requests_in_flight`), moved by every request:
 * a plain count, set on prom-client's Gauge only when it is scraped (prom-client's inc and dec
 * hash their labels each time).
 */
export class InFlightGauge {
  private count = 0;
  private readonly gauge: Gauge;

  constructor(options: { name: string; help: string; registers: Registry[] }) {
    const read = () => this.count;
    this.gauge = new Gauge({
      ...options,
      collect() {
        this.set(read());
      },
    });
  }

  inc(): void {
    this.count++;
  }

  dec(): void {
    this.count--;
  }

  /** The gauge as a scrape reads it. */
  get(): ReturnType<Gauge['get']> {
    return this.gauge.get();
  }
}
