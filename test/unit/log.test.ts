import { categoryLogger, createRootLogger, type LogSinks } from '../../src/log.ts';
import type { LogLevel } from '../../src/config.ts';

const FIXED = new Date('2026-03-04T05:06:07.089Z');

/** A logger writing into arrays, with a fixed clock. */
function capture(format: 'json' | 'human', options: { colour?: boolean; level?: LogLevel } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const sinks: LogSinks = { out: { write: (line: string) => out.push(line) }, err: { write: (line: string) => err.push(line) } };
  const root = createRootLogger({ level: options.level ?? 'trace', format, colour: options.colour ?? false, sinks, now: () => FIXED });
  return { log: categoryLogger(root, 'runs'), out, err };
}

/** The local wall-clock time of FIXED as HH:MM:SS.mmm. */
const LOCAL = [FIXED.getHours(), FIXED.getMinutes(), FIXED.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':') + '.089';

describe('JSON log format', () => {
  it('writes one object per line with timestamp, level, category, context and message', () => {
    const { log, out } = capture('json');
    log.info({ workspaceId: 'w-1', runId: 'r-1' }, 'run started');
    expect(out).toEqual([
      '{"level":"info","timestamp":"2026-03-04T05:06:07.089Z","category":"control.runs","workspaceId":"w-1","runId":"r-1","message":"run started"}\n',
    ]);
  });

  it('names the six levels in lower case, warning included', () => {
    const { log, out, err } = capture('json');
    log.trace('a');
    log.debug('b');
    log.info('c');
    log.warning('d');
    log.error('e');
    log.fatal('f');
    const levels = [...out, ...err].map((line) => (JSON.parse(line) as { level: string }).level);
    expect(levels).toEqual(['trace', 'debug', 'info', 'warning', 'error', 'fatal']);
  });

  it('sends trace, debug and info to stdout and warning, error and fatal to stderr, once each', () => {
    const { log, out, err } = capture('json');
    for (const level of ['trace', 'debug', 'info', 'warning', 'error', 'fatal'] as const) log[level](level);
    expect(out.map((line) => (JSON.parse(line) as { message: string }).message)).toEqual(['trace', 'debug', 'info']);
    expect(err.map((line) => (JSON.parse(line) as { message: string }).message)).toEqual(['warning', 'error', 'fatal']);
  });

  it('drops records below LOG_LEVEL', () => {
    const { log, out, err } = capture('json', { level: 'warning' });
    log.info('hidden');
    log.warning('shown');
    expect(out).toEqual([]);
    expect(err).toHaveLength(1);
  });
});

describe('human log format', () => {
  it('writes HH:MM:SS.mmm LEVEL [category] message key=value', () => {
    const { log, out } = capture('human');
    log.info({ workspaceId: 'w-1', runId: 'r-1', attempt: 2 }, 'run started');
    expect(out).toEqual([`${LOCAL} INFO [control.runs] run started workspaceId=w-1 runId=r-1 attempt=2\n`]);
  });

  it('quotes values with spaces and writes the level in upper case', () => {
    const { log, err } = capture('human');
    log.warning({ reason: 'build timed out', ok: false }, 'run failed');
    expect(err).toEqual([`${LOCAL} WARNING [control.runs] run failed reason="build timed out" ok=false\n`]);
  });

  it('adds no colour unless asked, and colours only the level when asked', () => {
    const plain = capture('human');
    plain.log.error('boom');
    expect(plain.err[0]).not.toContain('\u001b[');
    const coloured = capture('human', { colour: true });
    coloured.log.error('boom');
    expect(coloured.err).toEqual([`${LOCAL} \u001b[31mERROR\u001b[0m [control.runs] boom\n`]);
  });

  it('prints an error message inline and its stack below', () => {
    const { log, err } = capture('human');
    const error = new Error('disk full');
    log.error({ error }, 'write failed');
    const [first, ...rest] = err[0]!.split('\n');
    expect(first).toBe(`${LOCAL} ERROR [control.runs] write failed error="disk full"`);
    expect(rest[0]).toMatch(/^\s+at /);
  });
});
