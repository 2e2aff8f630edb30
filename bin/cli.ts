/** The operator CLI's entry point (`bin/cli`): oclif reads the commands from package.json's `oclif` section. */
import { runCli } from './run.ts';

await runCli(process.argv.slice(2), import.meta.url);
