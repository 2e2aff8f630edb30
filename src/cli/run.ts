import { Config, flush, run } from '@oclif/core';
import { closest, distance } from 'fastest-levenshtein';
import { describeFailure } from './command.ts';

/**
 * Runs the CLI on `argv` (what follows `cli` on the command line) and resolves with its exit code.
 * A command reports its own failures (CliCommand); what fails before one runs (an unknown command,
 * a misspelt topic) ends the same way: one line on stderr (JSON with --json) and its exit code.
 * A mistyped command is told the nearest one.
 */
export async function runCli(argv: string[], config: Config | string): Promise<number> {
  process.exitCode = undefined;
  try {
    await run(argv, config);
    await flush();
  } catch (error) {
    const failure = describeFailure(error);
    if (failure.code === 'unknown_command') failure.message += await suggestion(argv, config);
    process.stderr.write(
      argv.includes('--json') ? `${JSON.stringify({ error: { code: failure.code, message: failure.message } })}\n` : `Error: ${failure.message}\n`,
    );
    process.exitCode = failure.exit;
  }
  return process.exitCode ?? 0;
}

/** ` Did you mean "users promote"?` for the command nearest to what was typed (its words before the first flag), or nothing when none is near. */
async function suggestion(argv: string[], config: Config | string): Promise<string> {
  const loaded = typeof config === 'string' ? await Config.load(config) : config;
  const flagAt = argv.findIndex((word) => word.startsWith('-'));
  const typed = (flagAt === -1 ? argv : argv.slice(0, flagAt)).slice(0, 2).join(' ');
  const names = loaded.commandIDs.map((id) => id.replaceAll(':', ' '));
  if (!typed || names.length === 0) return '';
  // Of one word or two, whichever is nearer (`users promot bob`: the second word belongs to the command).
  const candidates = [typed, typed.split(' ')[0]!].map((words) => ({ words, match: closest(words, names) }));
  const best = candidates.toSorted((a, b) => distance(a.words, a.match) - distance(b.words, b.match))[0]!;
  return distance(best.words, best.match) <= Math.max(2, Math.floor(best.words.length / 3)) ? ` Did you mean "${best.match}"?` : '';
}
