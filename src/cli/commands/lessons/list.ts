import { presentLesson } from '../../../wire/presenters.ts';
import type { LessonList } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { size } from '../../lessons.ts';

/** `lessons list`: every lesson, as the panel's (GET /admin/lessons): its latest version and how its handouts stand. */
export default class LessonsList extends CliCommand {
  static override description =
    'List the lessons, by name: the latest version, its files and size, and how its handouts stand (delivered, pending, failed: every version counted).';
  static override examples = ['<%= config.bin %> lessons list', '<%= config.bin %> lessons list --json'];

  async run(): Promise<LessonList> {
    await this.parse(LessonsList);
    const lessons = await (await this.controlPlane()).store.lessons.list();
    this.table(
      lessons,
      {
        name: (l) => l.name,
        version: (l) => String(l.latest.version),
        files: (l) => String(l.latest.files),
        size: (l) => size(l.latest.sizeBytes),
        delivered: (l) => String(l.deliveries.delivered),
        pending: (l) => String(l.deliveries.pending),
        failed: (l) => String(l.deliveries.failed),
        id: (l) => l.id,
      },
      'No lessons yet: make one with "lessons create <name> <folder or archive>".',
    );
    return { lessons: lessons.map(presentLesson) };
  }
}
