/** How often something that does not answer yet is probed again (src/probe.ts): a tenth of its wait, between a floor and a ceiling. */
import { probeInterval, ProbeWaits } from '../../src/probe.ts';
import { onHeldClock } from '../helpers/clock.ts';

it.each([
  [0, 250],
  [2_500, 250],
  [5_000, 500],
  [9_000, 900],
  [10_000, 1000],
  [60_000, 1000],
])('waits %i ms → probes again in %i ms (floor 250, ceiling 1000)', (waited, next) => {
  expect(probeInterval(waited, 250, 1000)).toBe(next);
});

it('counts each key from its first probe that did not answer, and afresh once forgotten', async () => {
  const waits = new ProbeWaits();
  await onHeldClock(async (at) => {
    expect(waits.next('a', 100, 500)).toBe(100);
    at(3000);
    expect(waits.next('a', 100, 500)).toBe(300);
    expect(waits.next('b', 100, 500)).toBe(100);
    at(30_000);
    expect(waits.next('a', 100, 500)).toBe(500);
    waits.forget('a');
    expect(waits.next('a', 100, 500)).toBe(100);
  });
});
