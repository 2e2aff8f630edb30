import { existsSync } from 'node:fs';
import path from 'node:path';
import { Args, Flags } from '@oclif/core';
import { SingleBar } from 'cli-progress';
import { NotFoundError } from '../../errors.ts';
import { CLI_ACTOR } from '../../store/audit.ts';
import { presentWorkspaceChange } from '../../wire/presenters.ts';
import type { RestoreAnswer } from '../../wire/schemas.ts';
import { CliCommand } from '../command.ts';

/** `restore <file> [--to <slug|email>]`: a backup back into a stopped workspace (audited `workspace.restore`). */
export default class Restore extends CliCommand {
  static override description =
    "Put a backup back: into the workspace it was made of, or --to another (a coach handing work over: the editor's state, credentials, git identity and shell history stay out). The workspace must be stopped. The file is checked as it is read into a fresh volume, and the files it replaces are kept as a backup of their own (listed with the others) before the new ones are swapped in. Asks first on a terminal; --yes for scripts.";
  static override examples = ['<%= config.bin %> restore ada-20261123T104141Z.tar.gz', '<%= config.bin %> restore ./ada.tar.gz --to grace@school.org --yes'];
  static override args = {
    backup: Args.string({ description: 'a backup file, or the name of one under DATA_DIR/backups/', required: true }),
  };
  static override flags = {
    to: Flags.string({ description: "the workspace to restore into (slug or owner's email; default: the one backed up)" }),
    yes: CliCommand.yesFlag,
  };

  async run(): Promise<RestoreAnswer> {
    const { args, flags } = await this.parse(Restore);
    const { backups } = await this.controlPlane();
    const file = existsSync(args.backup) ? path.resolve(args.backup) : await backups.pathOf(args.backup).catch(() => undefined);
    if (!file) throw NotFoundError('backup_not_found', `No backup file ${JSON.stringify(args.backup)} (a path, or a name from "backups list").`);
    const to = flags.to ? await backups.workspace(flags.to) : undefined;
    await this.confirm(
      `Replace the files of ${to ? `workspace ${to.slug}` : 'the workspace it was made of'} with those of ${path.basename(file)}? Its current files are kept as a backup first.`,
      flags.yes,
    );
    const bar =
      process.stderr.isTTY && !this.jsonEnabled()
        ? new SingleBar({ format: 'restoring [{bar}] {percentage}% of {total} MB', stream: process.stderr })
        : undefined;
    let started = false;
    const restored = await backups.restore(CLI_ACTOR, file, {
      ...(to ? { to } : {}),
      onProgress: (bytes, total) => {
        if (!started) bar?.start(Math.max(1, Math.round(total / 1e6)), 0);
        started = true;
        bar?.update(Math.round(bytes / 1e6));
      },
    });
    bar?.stop();
    const { manifest, workspace, handedOver, kept } = restored;
    this.say(
      `Restored ${manifest.files} files (${(manifest.bytes / 1e6).toFixed(1)} MB) of ${manifest.slug} into ${workspace.slug}${handedOver ? ", leaving out the editor's state, credentials and history" : ''}.${kept ? ` The files it replaced are kept as ${kept} (cli restore ${kept} puts them back).` : ''}`,
    );
    return { workspace: presentWorkspaceChange(workspace), from: manifest.slug, handedOver, kept };
  }
}
