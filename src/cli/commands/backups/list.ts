import { CliCommand } from '../../command.ts';

/** `backups list`: the stored backups, newest first. */
export default class BackupsList extends CliCommand {
  static override description = 'List the backups under DATA_DIR/backups/, newest first.';
  static override examples = ['<%= config.bin %> backups list', '<%= config.bin %> backups list --json'];

  async run(): Promise<{
    backups: { name: string; slug: string | null; created: string | null; files: number | null; bytes: number | null; sizeBytes: number }[];
  }> {
    await this.parse(BackupsList);
    const { backups } = await this.controlPlane();
    const rows = (await backups.list()).map((backup) => ({
      name: backup.name,
      slug: backup.manifest?.slug ?? null,
      created: backup.manifest?.created ?? null,
      files: backup.manifest?.files ?? null,
      bytes: backup.manifest?.bytes ?? null,
      sizeBytes: backup.sizeBytes,
    }));
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
