import { Args } from '@oclif/core';
import { presentLessonDetail } from '../../../wire/presenters.ts';
import type { LessonDetail } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { count, minute, size } from '../../lessons.ts';

/** `lessons show <lesson>`: a lesson's versions, each student's deliveries and its collections, as GET /admin/lessons/{lessonId} answers. */
export default class LessonsShow extends CliCommand {
  static override description =
    "Show a lesson: its versions, each student's delivery of each version (pending, delivered and the folder under lessons/ it landed in, or failed and why; a reset asked or done) and its collections (when due, done, and each student's snapshot).";
  static override examples = ['<%= config.bin %> lessons show "Drive Intro"', '<%= config.bin %> lessons show drive-intro --json'];
  static override args = { lesson: Args.string({ description: "the lesson's name (any case) or id", required: true }) };

  async run(): Promise<LessonDetail> {
    const { args } = await this.parse(LessonsShow);
    const { store } = await this.controlPlane();
    const detail = await store.lessons.detail((await store.lessons.resolve(args.lesson)).id);
    this.say(`Lesson ${detail.name} (${detail.id}), made by ${detail.createdBy} on ${minute(detail.createdAt)}.\n`);
    this.table(
      detail.versions,
      {
        version: (v) => String(v.version),
        files: (v) => String(v.files),
        size: (v) => size(v.sizeBytes),
        by: (v) => v.createdBy,
        made: (v) => minute(v.createdAt),
      },
      'No versions.',
    );
    this.say('');
    this.table(
      detail.students,
      {
        student: (d) => d.slug,
        version: (d) => String(d.version),
        state: (d) => (d.resetRequestedAt ? `${d.state}, reset asked` : d.state),
        folder: (d) => (d.folder === null ? '' : `lessons/${d.folder}`),
        message: (d) => d.message || (d.resetAt ? `reset ${minute(d.resetAt)}${d.resetBackup ? ` after backup ${d.resetBackup}` : ''}` : ''),
      },
      'Not handed out yet.',
    );
    this.say('');
    this.table(
      detail.collections,
      {
        collection: (c) => c.id,
        due: (c) => minute(c.dueAt),
        state: (c) => (c.doneAt ? `done ${minute(c.doneAt)}` : c.dueAt > new Date() ? 'due later' : 'being taken'),
        snapshots: (c) =>
          (['taken', 'missing', 'failed', 'pending'] as const)
            .map((state) => [state, c.snapshots.filter((s) => s.state === state).length] as const)
            .filter(([, n]) => n > 0)
            .map(([state, n]) => `${n} ${state}`)
            .join(', ') || count(0, 'snapshot'),
      },
      'Not collected yet.',
    );
    return presentLessonDetail(detail);
  }
}
