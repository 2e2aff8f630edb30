import { flush, run, type Config } from '@oclif/core';
import { describeFailure } from './command.ts';

/**
 * Runs the CLI on `argv` (what follows `cli` on the command line) and resolves with its exit code.
 * A command reports its own failures (CliCommand); what fails before one runs (an unknown command,
 * a misspelt topic) ends the same way: one line on stderr (JSON with --json) and its exit code.
 */
export async function runCli(argv: string[], config: Config | string): Promise<number> {
  process.exitCode = undefined;
  try {
    await run(argv, config);
    await flush();
  } catch (error) {
    const failure = describeFailure(error);
    process.stderr.write(
      argv.includes('--json') ? `${JSON.stringify({ error: { code: failure.code, message: failure.message } })}\n` : `Error: ${failure.message}\n`,
    );
    process.exitCode = failure.exit;
  }
  return process.exitCode ?? 0;
}
