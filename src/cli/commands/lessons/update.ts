import { Args, Flags } from '@oclif/core';
import { presentLesson } from '../../../wire/presenters.ts';
import type { LessonAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { count, lessonFrom, size } from '../../lessons.ts';

/** `lessons update <lesson> <folder|archive>`: the lesson's next version (audited `lesson.create`), as POST /admin/lessons/{lessonId}/versions does. */
export default class LessonsUpdate extends CliCommand {
  static override description =
    'Give a lesson a new version of its files, from a folder or a .zip, .tar or .tar.gz archive of one (checked as "lessons create" checks them). Handed out, it lands beside the earlier version in a home that has it (lessons/<name> (v2)/), never over a student\'s files, and the student is told.';
  static override examples = [
    '<%= config.bin %> lessons update "Drive Intro" ./drive-intro',
    '<%= config.bin %> lessons update drive-intro drive-intro-v2.tar.gz',
  ];
  static override args = {
    lesson: Args.string({ description: "the lesson's name (any case) or id", required: true }),
    source: Args.string({ description: "a folder, a .zip, .tar or .tar.gz archive of one, or a git repository's https:// address", required: true }),
  };
  static override flags = {
    branch: Flags.string({ description: "with a repository: its branch (default: the repository's own)" }),
    subfolder: Flags.string({ description: 'with a repository: the folder of it that is the lesson (default: the whole repository)' }),
  };

  async run(): Promise<LessonAnswer> {
    const { args, flags } = await this.parse(LessonsUpdate);
    const plane = await this.controlPlane();
    const found = await plane.store.lessons.resolve(args.lesson);
    const lesson = await lessonFrom(plane, { lessonId: found.id }, { source: args.source, branch: flags.branch, subfolder: flags.subfolder });
    this.say(
      `${lesson.name} is at version ${lesson.latest.version}: ${count(lesson.latest.files, 'file')}, ${size(lesson.latest.sizeBytes)}. Hand it out with "lessons handout '${lesson.name}' --all": it lands beside the earlier version.`,
    );
    return { lesson: presentLesson(lesson) };
  }
}
