import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentDelivery } from '../../../wire/presenters.ts';
import type { LessonResetAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `lessons reset <lesson> <slug|email>`: asks that a student's folder of the lesson be the handed-out files again, after a backup (audited `lesson.reset`), as POST /admin/lessons/{lessonId}/reset does. */
export default class LessonsReset extends CliCommand {
  static override description =
    'Make one student\'s folder of a lesson the handed-out files again (the latest version that reached them): the running server\'s lesson controller backs up their home first, so their changes are in that backup ("lessons show" names it once done). Refused when the lesson has not reached them.';
  static override examples = ['<%= config.bin %> lessons reset "Drive Intro" ada', '<%= config.bin %> lessons reset drive-intro ada@school.org --json'];
  static override args = {
    lesson: Args.string({ description: "the lesson's name (any case) or id", required: true }),
    student: Args.string({ description: "the student's workspace slug, or their email", required: true }),
  };

  async run(): Promise<LessonResetAnswer> {
    const { args } = await this.parse(LessonsReset);
    const { store } = await this.controlPlane();
    const lesson = await store.lessons.resolve(args.lesson);
    const workspace = await store.workspaces.resolve(args.student);
    const delivery = await store.lessons.requestReset(CLI_ACTOR, lesson.id, workspace);
    this.say(
      `Resetting ${workspace.slug}'s lessons/${delivery.folder ?? lesson.name} to ${lesson.name} version ${delivery.version}: the running server's lesson controller backs up the home first.${await this.unattended()}`,
    );
    return { delivery: presentDelivery(delivery) };
  }
}
