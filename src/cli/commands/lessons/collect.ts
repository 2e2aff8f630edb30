import { Args, Flags } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentCollection } from '../../../wire/presenters.ts';
import type { CollectionAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { parseDateFlag } from '../../dates.ts';
import { minute } from '../../lessons.ts';

/** `lessons collect <lesson> [--at <date>]`: asks for a collection, now or at a deadline (audited `lesson.collect`), as POST /admin/lessons/{lessonId}/collections does. */
export default class LessonsCollect extends CliCommand {
  static override description =
    'Collect a lesson, now or at a deadline (--at): when it is due, the running server\'s lesson controller takes a snapshot of each student\'s folders of it (the CLI only asks); "lessons download" then writes them as one archive with a folder per student. --json answers the collection as asked (its snapshots appear when it is due), as the admin API does.';
  static override examples = [
    '<%= config.bin %> lessons collect "Drive Intro"',
    '<%= config.bin %> lessons collect "Drive Intro" --at 2026-12-04T15:30:00-05:00',
  ];
  static override args = { lesson: Args.string({ description: "the lesson's name (any case) or id", required: true }) };
  static override flags = {
    at: Flags.string({ description: 'when to take it: a date (midnight UTC) or an ISO 8601 date-time with its time zone (default: now)' }),
  };

  async run(): Promise<CollectionAnswer> {
    const { args, flags } = await this.parse(LessonsCollect);
    const dueAt = flags.at === undefined ? undefined : parseDateFlag(flags.at, 'at');
    const { store } = await this.controlPlane();
    const lesson = await store.lessons.resolve(args.lesson);
    const collection = await store.lessons.collect(CLI_ACTOR, lesson.id, dueAt);
    this.say(
      `Asked for a collection of ${lesson.name} (${collection.id}), due ${dueAt ? `at ${minute(collection.dueAt)} UTC` : 'now'}: the running server's lesson controller takes a snapshot of each student's folders of it then. "lessons download '${lesson.name}'" writes the archive once it is done.${await this.unattended()}`,
    );
    return { collection: presentCollection(collection) };
  }
}
