import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Args, Flags } from '@oclif/core';
import { ConflictError, NotFoundError } from '../../../errors.ts';
import { partOf } from '../../../lessons/lessons.ts';
import { presentCollection } from '../../../wire/presenters.ts';
import type { CollectionAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { count, lessonsOf, minute } from '../../lessons.ts';

/** `lessons download <lesson> [<collection>] [--output <file>]`: a done collection as one .tar.gz, as GET …/collections/{collectionId}/archive serves it. */
export default class LessonsDownload extends CliCommand {
  static override description =
    'Write a done collection of a lesson (the latest done by default, or the one named) as one .tar.gz: a folder per student with their lesson folders, and a NOT-COLLECTED.txt saying why for a student whose files could not be taken. --json answers the collection written, as the admin API shows it.';
  static override examples = [
    '<%= config.bin %> lessons download "Drive Intro"',
    '<%= config.bin %> lessons download "Drive Intro" 3f2b1c9e-… --output drive-intro.tar.gz',
  ];
  static override args = {
    lesson: Args.string({ description: "the lesson's name (any case) or id", required: true }),
    collection: Args.string({ description: 'the collection\'s id ("lessons show" lists them; default: the latest done)' }),
  };
  static override flags = {
    output: Flags.string({ char: 'o', description: "the file to write (default: the archive's own name, in this folder)" }),
  };

  async run(): Promise<CollectionAnswer> {
    const { args, flags } = await this.parse(LessonsDownload);
    const plane = await this.controlPlane();
    const { store } = plane;
    const lesson = await store.lessons.resolve(args.lesson);
    let collectionId = args.collection;
    if (collectionId === undefined) {
      const { collections } = await store.lessons.detail(lesson.id);
      if (collections.length === 0)
        throw NotFoundError('collection_not_found', `${lesson.name} has not been collected: "lessons collect '${lesson.name}'" asks for it.`);
      const done = collections.find((each) => each.doneAt !== null);
      if (!done)
        throw ConflictError(
          'collection_not_done',
          `No collection of ${lesson.name} is done yet: the latest is due ${minute(collections[0]!.dueAt)} UTC, and the running server's lesson controller takes its snapshots then.`,
        );
      collectionId = done.id;
    }
    const made = await lessonsOf(plane).archive(lesson.id, collectionId);
    const file = path.resolve(flags.output ?? made.fileName);
    const part = partOf(file);
    try {
      await pipeline(made.stream, createWriteStream(part, { mode: 0o600 }));
      await rename(part, file);
    } catch (error) {
      await rm(part, { force: true });
      throw error;
    }
    const collection = await store.lessons.collection(lesson.id, collectionId);
    const taken = collection.snapshots.filter((each) => each.state === 'taken').length;
    const left = collection.snapshots.length - taken;
    this.say(
      `Wrote ${file}: ${lesson.name} as collected ${minute(collection.doneAt!)} UTC, the folders of ${count(taken, 'student')}${left ? ` (${left} more not collected: NOT-COLLECTED.txt in their folders says why)` : ''}.`,
    );
    return { collection: presentCollection(collection) };
  }
}
