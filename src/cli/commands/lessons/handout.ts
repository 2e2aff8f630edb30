import { Args, Flags } from '@oclif/core';
import { ValidationError } from '../../../errors.ts';
import { CLI_ACTOR } from '../../../store/audit.ts';
import type { HandoutAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { count } from '../../lessons.ts';

/** `lessons handout <lesson> (--all | --student <slug|email>...)`: asks for the latest version in those homes (audited `lesson.handout`), as POST /admin/lessons/{lessonId}/handout does. */
export default class LessonsHandout extends CliCommand {
  static override description =
    "Hand a lesson's latest version out to every student (--all) or to the students named (--student, once for each): the running server's lesson controller writes it into each home under lessons/, whether the workspace runs or not, never over a student's files. Those who have it already are left as they are; a delivery that failed is tried again. \"lessons show\" follows each delivery.";
  static override examples = [
    '<%= config.bin %> lessons handout "Drive Intro" --all',
    '<%= config.bin %> lessons handout "Drive Intro" --student ada --student grace@school.org',
  ];
  static override args = { lesson: Args.string({ description: "the lesson's name (any case) or id", required: true }) };
  static override flags = {
    all: Flags.boolean({ description: 'to every student' }),
    student: Flags.string({ description: "to this student's workspace (slug or owner's email); once for each", multiple: true }),
  };

  async run(): Promise<HandoutAnswer> {
    const { args, flags } = await this.parse(LessonsHandout);
    if (!flags.all && !flags.student?.length)
      throw ValidationError('usage', 'Say who gets it: --all for every student, or --student <slug or email> (once for each).');
    if (flags.all && flags.student) throw ValidationError('invalid_flags', '--all and --student exclude each other: use one.');
    const { store } = await this.controlPlane();
    const lesson = await store.lessons.resolve(args.lesson);
    const targets = flags.all
      ? ({ all: true } as const)
      : { workspaceIds: [...new Set(await Promise.all(flags.student!.map(async (named) => (await store.workspaces.resolve(named)).id)))] };
    const answer = await store.lessons.handout(CLI_ACTOR, lesson.id, targets);
    this.say(
      answer.students === 0
        ? `Everyone named has ${lesson.name} version ${answer.version} already, or has it on its way: nothing more was asked.`
        : `Handing ${lesson.name} version ${answer.version} out to ${count(answer.students, 'student')}: the running server's lesson controller writes it into each home under lessons/; "lessons show '${lesson.name}'" follows each delivery.${await this.unattended()}`,
    );
    return answer;
  }
}
