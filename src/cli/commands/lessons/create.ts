import { Args, Flags } from '@oclif/core';
import { presentLesson } from '../../../wire/presenters.ts';
import type { LessonAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { count, lessonFrom, size } from '../../lessons.ts';

/** `lessons create <name> <folder|archive>`: makes a lesson, its files version 1 (audited `lesson.create`), as POST /admin/lessons does. */
export default class LessonsCreate extends CliCommand {
  static override description =
    'Make a lesson of a folder, or of a .zip, .tar or .tar.gz archive of one, on this machine, or of a git repository (its https:// address: cloned as a student\'s import is, IMPORT_* settings, its .git left out): its name is the folder it lands in, under lessons/ of each home. The files are checked as an upload is (no links, devices or paths out of the folder; at most LESSON_MAX_SIZE) and kept under DATA_DIR/lessons/. A later version: "lessons update".';
  static override examples = [
    '<%= config.bin %> lessons create "Drive Intro" ./drive-intro',
    '<%= config.bin %> lessons create "Drive Intro" drive-intro.tar.gz --json',
    '<%= config.bin %> lessons create Drive https://github.com/team1234/lessons --subfolder drive',
  ];
  static override args = {
    name: Args.string({
      description: "the lesson's name, its folder under lessons/ (1 to 60 letters, digits, spaces, dots, dashes, underscores)",
      required: true,
    }),
    source: Args.string({ description: "a folder, a .zip, .tar or .tar.gz archive of one, or a git repository's https:// address", required: true }),
  };
  static override flags = {
    branch: Flags.string({ description: "with a repository: its branch (default: the repository's own)" }),
    subfolder: Flags.string({ description: 'with a repository: the folder of it that is the lesson (default: the whole repository)' }),
  };

  async run(): Promise<LessonAnswer> {
    const { args, flags } = await this.parse(LessonsCreate);
    const lesson = await lessonFrom(await this.controlPlane(), { name: args.name }, { source: args.source, branch: flags.branch, subfolder: flags.subfolder });
    this.say(
      `Made lesson ${lesson.name} (version 1): ${count(lesson.latest.files, 'file')}, ${size(lesson.latest.sizeBytes)}. Hand it out with "lessons handout '${lesson.name}' --all".`,
    );
    return { lesson: presentLesson(lesson) };
  }
}
