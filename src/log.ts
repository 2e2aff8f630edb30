import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';
import type { LogLevel } from './config.ts';

/** A logger bound to one `control.<subsystem>` category; context fields go in the first argument. */
export type Logger = PinoLogger<LogLevel, true>;

/** Pino's numeric values for the spec's six levels. */
const LEVEL_VALUES: Record<LogLevel, number> = { trace: 10, debug: 20, info: 30, warning: 40, error: 50, fatal: 60 };
const LEVEL_BY_VALUE = new Map(Object.entries(LEVEL_VALUES).map(([name, value]) => [value, name]));

const COLOURS: Record<string, string> = { trace: '90', debug: '36', info: '32', warning: '33', error: '31', fatal: '35' };

/** Where log lines go: info and below to `out`, warning and above to `err`. */
export interface LogSinks {
  out: { write(line: string): unknown };
  err: { write(line: string): unknown };
}

export interface LogOptions {
  level: LogLevel;
  format: 'json' | 'human';
  /** ANSI colours in the human format; the caller decides (TTY and no NO_COLOR). */
  colour: boolean;
  sinks?: LogSinks;
  /** The clock, for tests. */
  now?: () => Date;
}

/**
 * Creates the root logger. JSON format: one object per line with `level` (lower case),
 * `timestamp` (ISO 8601 UTC), `category`, context fields, then `message`. Human format:
 * `HH:MM:SS.mmm LEVEL [category] message key=value ...` in local time.
 */
export function createRootLogger(options: LogOptions): Logger {
  const now = options.now ?? (() => new Date());
  const sinks = options.sinks ?? { out: process.stdout, err: process.stderr };
  const render = options.format === 'json' ? (line: string) => line : (line: string) => humanLine(line, options.colour);
  const through = (sink: LogSinks['out']): DestinationStream => ({ write: (line: string) => void sink.write(render(line)) });
  const stream = pino.multistream(
    [
      { level: 'trace', stream: through(sinks.out) },
      { level: 'warning', stream: through(sinks.err) },
    ],
    { dedupe: true, levels: LEVEL_VALUES },
  );
  return pino<LogLevel, true>(
    {
      level: options.level,
      customLevels: LEVEL_VALUES,
      useOnlyCustomLevels: true as const,
      messageKey: 'message',
      errorKey: 'error',
      base: null,
      timestamp: () => `,"timestamp":"${now().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  );
}

/** Returns a child logger for the category `control.<subsystem>`. */
export function categoryLogger(root: Logger, subsystem: string): Logger {
  return root.child({ category: `control.${subsystem}` }) as Logger;
}

const FIXED = new Set(['timestamp', 'level', 'category', 'message']);

/** Turns one JSON record from pino into the human format (with its newline). */
export function humanLine(json: string, colour: boolean): string {
  const record = JSON.parse(json) as Record<string, unknown>;
  const time = new Date(String(record.timestamp));
  const clock = [time.getHours(), time.getMinutes(), time.getSeconds()].map((part) => String(part).padStart(2, '0')).join(':');
  const stamp = `${clock}.${String(time.getMilliseconds()).padStart(3, '0')}`;
  const levelName = typeof record.level === 'number' ? (LEVEL_BY_VALUE.get(record.level) ?? 'info') : String(record.level);
  const level = colour ? `\u001b[${COLOURS[levelName] ?? '0'}m${levelName.toUpperCase()}\u001b[0m` : levelName.toUpperCase();
  const pairs: string[] = [];
  let stack = '';
  for (const [key, value] of Object.entries(record)) {
    if (FIXED.has(key)) continue;
    if (key === 'error' && value && typeof value === 'object') {
      const error = value as { message?: string; stack?: string };
      pairs.push(`error=${quote(error.message ?? '')}`);
      if (error.stack) stack = `\n${error.stack.split('\n').slice(1).join('\n')}`;
      continue;
    }
    pairs.push(`${key}=${quote(value)}`);
  }
  const context = pairs.length > 0 ? ` ${pairs.join(' ')}` : '';
  return `${stamp} ${level} [${String(record.category ?? 'control')}] ${String(record.message ?? '')}${context}${stack}\n`;
}

/** Strings bare when they are a simple token and JSON-quoted otherwise; other values as JSON. */
function quote(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? 'undefined';
}
