import { presentBackup } from '../../../wire/presenters.ts';
import type { BackupList } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `backups list`: the stored backups, newest first. */
export default class BackupsList extends CliCommand {
  static override description = 'List the backups under DATA_DIR/backups/, newest first.';
  static override examples = ['<%= config.bin %> backups list', '<%= config.bin %> backups list --json'];

  async run(): Promise<BackupList> {
    await this.parse(BackupsList);
    const { backups } = await this.controlPlane();
    const rows = (await backups.list()).map(presentBackup);
    this.table(
      rows,
      {
        name: (row) => row.name,
        workspace: (row) => row.slug ?? '?',
        created: (row) => row.created ?? '?',
        files: (row) => (row.files === null ? '?' : String(row.files)),
        data: (row) => (row.bytes === null ? '?' : `${(row.bytes / 1e6).toFixed(1)} MB`),
        file: (row) => `${(row.sizeBytes / 1e6).toFixed(1)} MB`,
      },
      `No backups yet in ${backups.dir}: make one with "backup <slug>".`,
    );
    return { backups: rows };
  }
}
