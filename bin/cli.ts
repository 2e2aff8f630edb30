/**
 * The operator CLI's entry point (`bin/cli`): oclif reads the commands from package.json's `oclif`
 * section; they open the control plane through the composition root (cliHost), loaded only by a
 * command that opens it (`--help` and a command that reads only a file load none of it). Node's
 * compile cache keeps the compiled modules between runs (in the system's temporary directory).
 */
import module from 'node:module';

module.enableCompileCache?.();
const { cliHost } = await import('../src/cli/command.ts');
const { runCli } = await import('../src/cli/run.ts');
cliHost.open = async (options) => (await import('./cli-plane.ts')).openForCli(options);
await runCli(process.argv.slice(2), import.meta.url);
