/**
 * The operator CLI's entry point (`bin/cli`): oclif reads the commands from package.json's `oclif`
 * section; they open the control plane through the composition root (cliHost).
 */
import { cliHost } from '../src/cli/command.ts';
import { runCli } from '../src/cli/run.ts';
import { openForCli } from './control-plane.ts';

cliHost.open = openForCli;
await runCli(process.argv.slice(2), import.meta.url);
