import { Args, Flags } from '@oclif/core';
import { SingleBar } from 'cli-progress';
import { ValidationError } from '../../errors.ts';
import { CLI_ACTOR } from '../../store/audit.ts';
import { CliCommand } from '../command.ts';

/** `backup <slug|email> [--output FILE|-]`: a workspace's home to a tar.gz (audited `workspace.backup`). */
export default class Backup extends CliCommand {
  static override description =
    "Back up a workspace's home (its files, modes and owners) to a tar.gz with a manifest: under DATA_DIR/backups/ by default, or --output FILE, or - for stdout. Works while it runs (a file changing meanwhile fails it): stop it first for a quiet copy.";
  static override examples = [
    '<%= config.bin %> backup ada',
    '<%= config.bin %> backup ada@school.org --output ada.tar.gz',
    '<%= config.bin %> backup ada --output - | ssh archive "cat > ada.tar.gz"',
  ];
  static override args = { workspace: Args.string({ description: "the workspace's slug, or its owner's email", required: true }) };
  static override flags = {
    output: Flags.string({ char: 'o', description: 'write the backup here instead (- for stdout)' }),
  };

  async run(): Promise<{ name: string | null; file: string | null; slug: string; files: number; bytes: number; sha256: string; sizeBytes: number | null }> {
    const { args, flags } = await this.parse(Backup);
    const toStdout = flags.output === '-';
    if (toStdout && this.jsonEnabled()) throw ValidationError('invalid_flags', '--json and --output - both want stdout: use one.');
    const { backups } = await this.controlPlane();
    const workspace = await backups.workspace(args.workspace);
    // On a terminal only, and never on stdout (it may carry the backup).
    const bar =
      process.stderr.isTTY && !this.jsonEnabled()
        ? new SingleBar({ format: `backing up ${workspace.slug}: {mb} MB read`, stream: process.stderr, noTTYOutput: false })
        : undefined;
    bar?.start(0, 0, { mb: '0.0' });
    const made = await backups.create(CLI_ACTOR, workspace, {
      ...(toStdout ? { out: process.stdout } : flags.output ? { file: flags.output } : {}),
      onProgress: (bytes) => bar?.update(0, { mb: (bytes / 1e6).toFixed(1) }),
    });
    bar?.stop();
    const where = made.name ? `${backups.dir}/${made.name}` : toStdout ? 'stdout' : flags.output!;
    // The same two figures as "backups list" and the panel: the files' data, and the compressed file.
    const file = made.sizeBytes === null ? '' : ` (a ${(made.sizeBytes / 1e6).toFixed(1)} MB file)`;
    const line = `Backed up ${workspace.slug}: ${made.manifest.files} files, ${(made.manifest.bytes / 1e6).toFixed(1)} MB of data${file}, to ${where}.`;
    if (toStdout) process.stderr.write(`${line}\n`);
    else this.say(line);
    return {
      name: made.name,
      file: made.name ? `${backups.dir}/${made.name}` : toStdout ? null : flags.output!,
      slug: workspace.slug,
      files: made.manifest.files,
      bytes: made.manifest.bytes,
      sha256: made.manifest.sha256,
      sizeBytes: made.sizeBytes,
    };
  }
}
