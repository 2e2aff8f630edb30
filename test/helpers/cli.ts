import { format } from 'node:util';
import { openForCli } from '../../bin/cli-plane.ts';
import { cliHost, environment } from '../../src/cli/command.ts';
import { runCli } from '../../src/cli/run.ts';
import { PROJECT_ROOT } from '../../src/config.ts';

// As bin/cli.ts sets it: commands open the control plane through the composition root.
cliHost.open = openForCli;

/** What a command printed and how it ended. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `bin/cli <argv>` in this process, as the program runs it (the same oclif configuration and
 * opener), with `env` as its whole environment, and captures stdout, stderr and the exit code.
 */
export async function cli(argv: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  // The very functions, put back as they were afterwards (never called through these references).
  // oxlint-disable-next-line typescript/unbound-method
  const writes = { out: process.stdout.write, err: process.stderr.write, log: console.log, error: console.error };
  process.stdout.write = ((chunk: string | Uint8Array) => stdout.push(String(chunk)) > 0) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => stderr.push(String(chunk)) > 0) as typeof process.stderr.write;
  // oclif prints through console.log and console.error, which Jest replaces with its own.
  console.log = (...args: unknown[]) => void stdout.push(`${format(...args)}\n`);
  console.error = (...args: unknown[]) => void stderr.push(`${format(...args)}\n`);
  environment.read = () => ({ ...env });
  try {
    // A fresh oclif configuration each time, as each run of the program has (one is not meant to serve two runs).
    const code = await runCli(argv, PROJECT_ROOT);
    return { code, stdout: stdout.join(''), stderr: stderr.join('') };
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    console.log = writes.log;
    console.error = writes.error;
    environment.read = () => undefined;
    process.exitCode = undefined;
  }
}
