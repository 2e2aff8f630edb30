/** A process clock a unit test moves by hand: Date.now() held at the start, then moved forward by `at(ms)`. */
import { jest } from '@jest/globals';

/** Runs `steps` with Date.now() held at the time it was called, moved to that time + `ms` by `at(ms)`; restored after. */
export async function onHeldClock(steps: (at: (ms: number) => void) => Promise<void>): Promise<void> {
  const started = Date.now();
  const now = jest.spyOn(Date, 'now').mockReturnValue(started);
  try {
    await steps((ms) => now.mockReturnValue(started + ms));
  } finally {
    now.mockRestore();
  }
}
