/**
 * RequestHistogram (src/request-histogram.ts) is exported exactly as prom-client's Histogram is,
 * for the same observations: same buckets (a value on a bound counts in it), sums, counts, labels.
 */
import { Histogram, Registry } from 'prom-client';
import { InFlightGauge, RequestHistogram, statusClass } from '../../src/request-histogram.ts';

const options = { name: 'demo_seconds', help: 'A demo.', labelNames: ['method', 'status_class'] as const, buckets: [0.01, 0.1, 1] };
const observations: [Record<'method' | 'status_class', string>, number][] = [
  [{ method: 'GET', status_class: '2xx' }, 0.005],
  [{ method: 'GET', status_class: '2xx' }, 0.01],
  [{ method: 'GET', status_class: '2xx' }, 0.5],
  [{ method: 'POST', status_class: '4xx' }, 3],
  [{ method: 'GET', status_class: '2xx' }, 0.1],
];

it("exports what prom-client's Histogram exports for the same observations", async () => {
  const ours = new Registry();
  const theirs = new Registry();
  const fast = new RequestHistogram({ ...options, registers: [ours] });
  const reference = new Histogram({ ...options, registers: [theirs] });
  for (const [labels, value] of observations) {
    fast.observe(labels, value);
    reference.observe(labels, value);
  }
  const end = fast.startTimer({ method: 'PUT' });
  const seconds = end({ status_class: '5xx' });
  reference.observe({ method: 'PUT', status_class: '5xx' }, seconds);
  expect(await ours.metrics()).toBe(await theirs.metrics());
  expect(await ours.metrics()).toContain('demo_seconds_bucket{le="0.01",method="GET",status_class="2xx"} 2');

  ours.resetMetrics();
  expect(await ours.metrics()).toBe('# HELP demo_seconds A demo.\n# TYPE demo_seconds histogram\n');
});

it('keeps label sets that share values apart, however many labels they have', async () => {
  const three = { name: 'three_seconds', help: 'Three labels.', labelNames: ['method', 'route', 'status_class'] as const, buckets: [1] };
  const ours = new Registry();
  const theirs = new Registry();
  const fast = new RequestHistogram({ ...three, registers: [ours] });
  const reference = new Histogram({ ...three, registers: [theirs] });
  const sets = [
    { method: 'GET', route: '/a', status_class: '2xx' },
    { method: 'GET', route: '/b', status_class: '2xx' },
    { method: 'POST', route: '/a', status_class: '2xx' },
    { method: 'GET', route: '/a', status_class: '5xx' },
    { method: 'GET', route: '/a', status_class: '2xx' },
  ];
  sets.forEach((labels, i) => {
    fast.observe(labels, i);
    reference.observe(labels, i);
  });
  expect(await ours.metrics()).toBe(await theirs.metrics());
});

it('names each status class with one constant string', () => {
  expect([100, 204, 301, 404, 599].map(statusClass)).toEqual(['1xx', '2xx', '3xx', '4xx', '5xx']);
  expect(statusClass(200)).toBe(statusClass(299));
});

it('exports the requests in flight as a gauge read when scraped', async () => {
  const registry = new Registry();
  const inFlight = new InFlightGauge({ name: 'demo_in_flight', help: 'Under way.', registers: [registry] });
  inFlight.inc();
  inFlight.inc();
  inFlight.inc();
  inFlight.dec();
  expect(await registry.metrics()).toBe('# HELP demo_in_flight Under way.\n# TYPE demo_in_flight gauge\ndemo_in_flight 2\n');
  expect((await inFlight.get()).values).toEqual([{ labels: {}, value: 2 }]);
});
