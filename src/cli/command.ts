/**
 * What every operator command shares: the control plane it opens (database and store, nothing that
 * runs in the background), its output (tables, or JSON with --json, nothing but data on stdout), its
 * confirmations, and the one way a failure ends it: one line on stderr and a documented exit code.
 */
import { createInterface } from 'node:readline/promises';
import { Command, Flags, type Interfaces } from '@oclif/core';
import { AllowlistFormatError } from '../allowlist/allowlist.ts';
import { AllowlistFile } from '../allowlist/allowlist-file.ts';
import type { Backups } from '../backup/backups.ts';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { isUnreachable, redactUrl } from '../db/errors.ts';
import { EngineUnreachableError } from '../docker/runtime.ts';
import { AppError } from '../errors.ts';
import { createRootLogger, type Logger } from '../log.ts';
import type { SurfaceStore } from '../store/index.ts';

/** The exit codes of every command (docs/operations.md lists them). */
export const EXIT = {
  ok: 0,
  /** Something unexpected failed. */
  failure: 1,
  /** Bad usage: an unknown command or flag, a malformed argument (oclif's own code for usage errors). */
  usage: 2,
  /** What the command names does not exist: a user, a workspace, an allowlist entry, a backup. */
  notFound: 3,
  /** Refused by a rule: the last admin, a running workspace, a malformed allowlist file, a lesson past LESSON_MAX_SIZE, a repository's host not allowed. */
  refused: 4,
  /** The database or the Docker Engine cannot be reached, or the embedded database is busy. */
  unavailable: 5,
} as const;

/** A failure as the CLI reports it. */
export interface Failure {
  code: string;
  message: string;
  exit: number;
}

/** How an error ends a command: a stable code, one line for the operator, and the exit code. */
export function describeFailure(error: unknown, databaseUrl?: string): Failure {
  if (error instanceof ConfigError) return { code: 'invalid_configuration', message: `Invalid configuration: ${error.problems.join('; ')}`, exit: EXIT.usage };
  if (error instanceof AllowlistFormatError)
    return { code: 'allowlist_file_invalid', message: `The allowlist file is not valid; fix it first: ${error.message}`, exit: EXIT.refused };
  if (error instanceof AppError) {
    const exit =
      error.status === 400
        ? EXIT.usage
        : error.status === 404
          ? EXIT.notFound
          : error.status === 403 || error.status === 409 || error.status === 413
            ? EXIT.refused
            : error.status === 503
              ? EXIT.unavailable
              : EXIT.failure;
    return { code: error.code, message: error.message, exit };
  }
  const oclif = (error as { oclif?: { exit?: number } }).oclif;
  if (oclif?.exit !== undefined) {
    const message = firstLine((error as Error).message);
    const unknown = /^command (\S+) not found$/.exec(message);
    return unknown
      ? { code: 'unknown_command', message: `Unknown command "${unknown[1]!.replaceAll(':', ' ')}"; see --help for the commands.`, exit: EXIT.usage }
      : { code: 'usage', message, exit: oclif.exit };
  }
  // Before the database's check: an engine refusing the connection has the code a database has (ECONNREFUSED).
  if (error instanceof EngineUnreachableError) return { code: 'engine_unavailable', message: `${error.message}: ${error.remedy}.`, exit: EXIT.unavailable };
  if (isUnreachable(error)) {
    const where = databaseUrl ? ` at ${redactUrl(databaseUrl)}` : '';
    return {
      code: 'database_unavailable',
      message: `The database${where} cannot be reached (${firstLine((error as Error).message)}).`,
      exit: EXIT.unavailable,
    };
  }
  return { code: 'internal_error', message: firstLine((error as Error)?.message ?? String(error)), exit: EXIT.failure };
}

const firstLine = (text: string) => text.split('\n')[0]!.trim();

/** What a number flag accepts (oclif keeps `min` and `max` on the flag). */
interface FlagRange {
  min?: number;
  max?: number;
}

/**
 * One line for what oclif's parser refused: a number flag out of range or not a number names the
 * range it takes (`--limit takes a whole number from 1 to 500 (got "0").`); anything else is its
 * message on one line, without the pointer to --help.
 */
export function usageMessage(message: string, flags: Record<string, FlagRange> | undefined): string {
  const lines = message
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('See more help'));
  const name = /^Parsing --(\S+)/.exec(lines[0] ?? '')?.[1];
  if (!name) return lines.join(' ');
  const flag = flags?.[name];
  const received = /received: (.*)$/.exec(lines.at(-1) ?? '')?.[1];
  const got = received === undefined ? '' : ` (got ${JSON.stringify(received)})`;
  if (flag?.min !== undefined && flag.max !== undefined) return `--${name} takes a whole number from ${flag.min} to ${flag.max}${got}.`;
  return `--${name}: ${lines.slice(1).join(' ') || 'not a value it takes'}.`;
}

/** What oclif parses flags and arguments into (its own FlagOutput and ArgOutput, which it does not export). */
type Outputs = { [name: string]: unknown };

/** What a command works with: the configuration, the store and the backups over the configured database. */
export interface CliPlane {
  config: Config;
  store: SurfaceStore;
  backups: Backups;
  /** Closes what was opened (the database). */
  stop(): Promise<void>;
}

/**
 * How commands open their CliPlane: set by the entry point (bin/cli.ts; the tests' helper too) to
 * the composition root's opener, which stands above src/ (src/ imports nothing of bin/, api/ or
 * controllers/). `command` names the command for the embedded database's holder file.
 */
export const cliHost: { open?: (options: { config: Config; log: Logger; command: string }) => Promise<CliPlane> } = {};

/** The environment commands are configured from: undefined is the process's, which loadConfig reads (tests give theirs). */
export const environment = { read: (): NodeJS.ProcessEnv | undefined => undefined };

/** The base of every command of `bin/cli`. */
export abstract class CliCommand extends Command {
  static override enableJsonFlag = true;
  /** Whether the command opens the database (src/cli/argv.ts lists those that do, for bin/cli to start it early). */
  static opensDatabase = true;

  private plane: CliPlane | undefined;
  private loaded: Config | undefined;
  /** The database the command uses, for its failure messages. */
  private databaseUrl: string | undefined;

  /** The `--yes` flag of commands that change or delete data. */
  protected static yesFlag = Flags.boolean({ char: 'y', description: 'Do not ask for confirmation (for scripts).' });

  /**
   * The control plane over the configured database, opened once: the store and the runtime, nothing
   * running in the background. The embedded database is shared with a running server (its changes
   * reach the server at once); an unreachable database server is reported, not waited for.
   */
  protected async controlPlane(): Promise<CliPlane> {
    if (this.plane) return this.plane;
    if (!cliHost.open) throw new Error('no way to open the control plane: the CLI runs through bin/cli');
    const config = this.settings();
    const err = { write: (line: string) => process.stderr.write(line) };
    const log = createRootLogger({ level: 'warning', format: 'human', colour: false, sinks: { out: err, err } });
    this.plane = await cliHost.open({ config, log, command: `cli ${this.id?.replaceAll(':', ' ') ?? ''}`.trim() });
    return this.plane;
  }

  /** The configuration, read once: all that a command which opens no database needs (with allowlistFile). */
  protected settings(): Config {
    this.loaded ??= loadConfig(environment.read());
    this.databaseUrl = this.loaded.databaseUrl;
    return this.loaded;
  }

  /** The allowlist file alone, for a command that only reads it (no database opened, nothing audited). */
  protected allowlistFile(): AllowlistFile {
    return AllowlistFile.in(this.settings().dataDir);
  }

  /** Prints rows as aligned columns under upper-case headings (not with --json, where run()'s result is the output). */
  protected table<T>(rows: readonly T[], columns: Record<string, (row: T) => string>, empty: string): void {
    if (this.jsonEnabled()) return;
    if (rows.length === 0) return this.log(empty);
    const headings = Object.keys(columns);
    const cells = rows.map((row) => Object.values(columns).map((cell) => cell(row)));
    const widths = headings.map((heading, i) => Math.max(heading.length, ...cells.map((line) => line[i]!.length)));
    const line = (values: string[]) => values.map((value, i) => (i === values.length - 1 ? value : value.padEnd(widths[i]!))).join('  ');
    this.log(line(headings.map((heading) => heading.toUpperCase())));
    for (const row of cells) this.log(line(row));
  }

  /** A warning for the operator: one line on stderr (with --json too, where stdout is the answer). */
  protected note(text: string): void {
    process.stderr.write(`Warning: ${text}\n`);
  }

  /**
   * What a change recorded now waits for when no server runs on this database (none seen in the
   * last SERVER_GONE_AFTER_MS): a clause to add to the command's line, or '' when one runs.
   */
  protected async unattended(): Promise<string> {
    const running = await (await this.controlPlane()).store.servers.live();
    return running.length > 0 ? '' : ' No control plane is running to act on it: it takes effect when the server starts.';
  }

  /** Prints one line of the command's answer (not with --json). */
  protected say(text: string): void {
    if (!this.jsonEnabled()) this.log(text);
  }

  /**
   * Asks before changing or deleting data: `--yes` answers for scripts; on a terminal the operator
   * answers; anywhere else the command is refused (a usage error), so nothing is deleted unasked.
   */
  protected async confirm(question: string, yes: boolean): Promise<void> {
    if (yes) return;
    if (!process.stdin.isTTY || !process.stderr.isTTY) throw new AppError(400, 'confirmation_required', `${question} Add --yes to confirm without a terminal.`);
    const prompt = createInterface({ input: process.stdin, output: process.stderr });
    try {
      const answer = await prompt.question(`${question} [y/N] `);
      if (!/^y(es)?$/i.test(answer.trim())) throw new AppError(409, 'not_confirmed', 'Nothing was changed.');
    } finally {
      prompt.close();
    }
  }

  /** Parses the command line; anything it refuses (a missing or malformed argument or flag) is a usage error (exit 2). */
  protected override async parse<F extends Outputs, B extends Outputs, A extends Outputs>(
    options?: Interfaces.Input<F, B, A>,
    argv?: string[],
  ): Promise<Interfaces.ParserOutput<F, B, A>> {
    try {
      return await super.parse(options, argv);
    } catch (error) {
      if (error instanceof AppError) throw error;
      throw new AppError(400, 'usage', usageMessage((error as Error).message, options?.flags as Record<string, FlagRange> | undefined));
    }
  }

  protected override async catch(error: Error): Promise<void> {
    const failure = describeFailure(error, this.databaseUrl);
    process.stderr.write(
      this.jsonEnabled() ? `${JSON.stringify({ error: { code: failure.code, message: failure.message } })}\n` : `Error: ${failure.message}\n`,
    );
    process.exitCode = failure.exit;
  }

  protected override async finally(outcome: Error | undefined): Promise<void> {
    await this.plane?.stop();
    this.plane = undefined;
    await super.finally(outcome);
  }
}
