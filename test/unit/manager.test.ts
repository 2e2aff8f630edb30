import { Manager, type Runnable } from '../../controllers/manager.ts';
import { categoryLogger, createRootLogger } from '../../src/log.ts';
import type { Fence } from '../../src/store/leases.ts';

/** What the runnables of a test were made on: the term's fence (undefined: unfenced). */
interface TestTerm {
  fence: Fence | undefined;
}

/** A fence for `term`, as the leader election hands one to `lead`. */
const fenceOf = (term: number): Fence => ({ holder: 'test', term, holdMs: undefined, assertCurrent: () => undefined, refused: () => undefined });

/** The error lines of `records`: their category, part and message. */
const failures = (records: Record<string, unknown>[]) =>
  records.filter((record) => record.level === 'error').map((record) => ({ category: record.category, part: record.part, message: record.message }));

/** A manager over test runnables, the events they record (`start a`, `stop a`) and its log records. */
function setup(options: { elected?: boolean } = {}) {
  const records: Record<string, unknown>[] = [];
  const sink = { write: (line: string) => records.push(JSON.parse(line) as Record<string, unknown>) };
  const root = createRootLogger({ level: 'debug', format: 'json', colour: false, sinks: { out: sink, err: sink } });
  const events: string[] = [];
  const manager = new Manager<TestTerm>({
    log: categoryLogger(root, 'server'),
    term: (fence) => ({ fence }),
    election: options.elected ? { log: categoryLogger(root, 'leader') } : undefined,
  });
  /** A runnable recording its start and stop; `failStop` makes its stop throw, `onStart`/`onStop` run inside them. */
  const part = (
    name: string,
    behaviour: { failStart?: boolean; failStop?: boolean; onStart?: () => Promise<void>; onStop?: () => Promise<void> } = {},
  ): Runnable => ({
    start: async () => {
      await behaviour.onStart?.();
      if (behaviour.failStart) throw new Error(`${name} cannot start`);
      events.push(`start ${name}`);
    },
    stop: async () => {
      await behaviour.onStop?.();
      if (behaviour.failStop) throw new Error(`${name} cannot stop`);
      events.push(`stop ${name}`);
    },
  });
  /** A leader-only runnable recording the term it was made for (`start w@1`; `@-` unfenced). */
  const termPart =
    (name: string, behaviour: Parameters<typeof part>[1] = {}) =>
    (term: TestTerm) =>
      part(`${name}@${term.fence?.term ?? '-'}`, behaviour);
  return { manager, events, records, part, termPart };
}

describe('Manager', () => {
  it('starts its runnables in the order they were added and stops them in reverse', async () => {
    const { manager, events, part } = setup();
    for (const name of ['a', 'b', 'c']) manager.add(name, part(name));
    await manager.start();
    expect(events).toEqual(['start a', 'start b', 'start c']);
    await manager.stop();
    expect(events.slice(3)).toEqual(['stop c', 'stop b', 'stop a']);
  });

  it('logs a runnable that fails to stop and still stops the others', async () => {
    const { manager, events, records, part } = setup();
    manager.add('a', part('a'));
    manager.add('b', part('b', { failStop: true }));
    manager.add('c', part('c'));
    await manager.start();
    await manager.stop();
    expect(events.slice(3)).toEqual(['stop c', 'stop a']);
    expect(failures(records)).toEqual([{ category: 'control.server', part: 'b', message: 'stopping b failed' }]);
  });

  it('throws a failed start, starts nothing after it, and stops only those started', async () => {
    const { manager, events, part } = setup();
    manager.add('a', part('a'));
    manager.add('b', part('b', { failStart: true }));
    manager.add('c', part('c'));
    await expect(manager.start()).rejects.toThrow('b cannot start');
    await manager.stop();
    expect(events).toEqual(['start a', 'stop a']);
  });

  it('starts nothing more once a stop began during start, and stops what started once the start under way ends', async () => {
    const { manager, events, part } = setup();
    let entered!: () => void;
    const starting = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    manager.add('a', part('a'));
    manager.add(
      'b',
      part('b', {
        onStart: () => {
          entered();
          return gate;
        },
      }),
    );
    manager.add('c', part('c'));
    const started = manager.start();
    await starting;
    const stopped = manager.stop();
    release();
    await Promise.all([started, stopped]);
    expect(events).toEqual(['start a', 'start b', 'stop b', 'stop a']);
  });

  it('without an election, makes a leader-only runnable once, unfenced, when added, and runs it in its place', async () => {
    const { manager, events, part, termPart } = setup();
    manager.add('a', part('a'));
    const made = manager.add('w', termPart('w'), { leaderOnly: true });
    manager.add('c', part('c'));
    const instance = made.current;
    expect(instance).toBeDefined();
    await manager.start();
    expect(made.current).toBe(instance);
    await manager.stop();
    expect(events).toEqual(['start a', 'start w@-', 'start c', 'stop c', 'stop w@-', 'stop a']);
  });

  it("with an election, starts no leader-only runnable itself: each term's lead makes them anew on its fence and starts them in order, follow stops them in reverse", async () => {
    const { manager, events, part, termPart } = setup({ elected: true });
    manager.add('a', part('a'));
    const w = manager.add('w', termPart('w'), { leaderOnly: true });
    manager.add('r', termPart('r'), { leaderOnly: true });
    await manager.start();
    expect(events).toEqual(['start a']);
    expect(w.current).toBeUndefined();

    await manager.lead(fenceOf(1));
    const first = w.current;
    expect(first).toBeDefined();
    await manager.follow();
    expect(w.current).toBeUndefined();
    await manager.lead(fenceOf(2));
    expect(w.current).toBeDefined();
    expect(w.current).not.toBe(first);
    await manager.follow();
    expect(events.slice(1)).toEqual(['start w@1', 'start r@1', 'stop r@1', 'stop w@1', 'start w@2', 'start r@2', 'stop r@2', 'stop w@2']);
  });

  it("logs a term's runnable that fails to stop on the election's log and still stops the others", async () => {
    const { manager, events, records, termPart } = setup({ elected: true });
    manager.add('w', termPart('w'), { leaderOnly: true });
    manager.add('r', termPart('r', { failStop: true }), { leaderOnly: true });
    manager.add('i', termPart('i'), { leaderOnly: true });
    await manager.lead(fenceOf(1));
    await manager.follow();
    expect(events.slice(3)).toEqual(['stop i@1', 'stop w@1']);
    expect(failures(records)).toEqual([{ category: 'control.leader', part: 'r', message: 'stopping r failed' }]);
  });

  it("throws a term's failed start, and follow stops those of the term that started", async () => {
    const { manager, events, termPart } = setup({ elected: true });
    manager.add('w', termPart('w'), { leaderOnly: true });
    manager.add('r', termPart('r', { failStart: true }), { leaderOnly: true });
    manager.add('i', termPart('i'), { leaderOnly: true });
    await expect(manager.lead(fenceOf(1))).rejects.toThrow('r@1 cannot start');
    await manager.follow();
    expect(events).toEqual(['start w@1', 'stop w@1']);
  });

  it("stopped while leading, stops the term's runnables where the election was added: after those added later, before those added earlier", async () => {
    const { manager, events, part, termPart } = setup({ elected: true });
    manager.add('a', part('a'));
    // The election as controllers/leadership.ts is one: it leads once started, and stopping it follows.
    manager.add('election', part('election', { onStart: () => manager.lead(fenceOf(1)), onStop: () => manager.follow() }));
    manager.add('w', termPart('w'), { leaderOnly: true });
    manager.add('r', termPart('r'), { leaderOnly: true });
    manager.add('s', part('s'));
    await manager.start();
    expect(events).toEqual(['start a', 'start w@1', 'start r@1', 'start election', 'start s']);
    await manager.stop();
    expect(events.slice(5)).toEqual(['stop s', 'stop r@1', 'stop w@1', 'stop election', 'stop a']);
  });
});
