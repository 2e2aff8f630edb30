/**
 * What the `lessons` commands share: the Lessons service over the CLI's store and DATA_DIR (the
 * API's, made the same way: api/app.ts), a lesson's files read from a folder or an archive on this
 * machine, and sizes as the operator reads them. What reaches homes is the running server's lesson
 * controller's (controllers/lessons.ts): the commands only record what is wanted.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { NotFoundError } from '../errors.ts';
import { Lessons } from '../lessons/lessons.ts';
import { CLI_ACTOR } from '../store/audit.ts';
import type { LessonRecord } from '../store/lessons.ts';
import type { CliPlane } from './command.ts';

/** The Lessons service of a CLI plane (loaded only by the lessons commands: tar and its checks are not every command's). */
export function lessonsOf(plane: CliPlane): Lessons {
  return new Lessons({ lessons: plane.store.lessons, dataDir: plane.config.dataDir, maxBytes: plane.config.lessonMaxBytes });
}

/**
 * Makes a lesson (`{ name }`) or its next version (`{ lessonId }`) of `source`, as actor `cli`
 * (audit `lesson.create`): a folder is packed as it is (Lessons.fromFolder), a file is read as an
 * uploaded .tar or .tar.gz (Lessons.upload), each checked as the API checks an upload; 404
 * `lesson_source_not_found` when nothing is at the path.
 */
export async function lessonFrom(plane: CliPlane, target: { name: string } | { lessonId: string }, source: string): Promise<LessonRecord> {
  const where = path.resolve(source);
  const found = await stat(where).catch(() => undefined);
  if (!found || !(found.isDirectory() || found.isFile()))
    throw NotFoundError('lesson_source_not_found', `No folder or file at ${JSON.stringify(source)}: give the lesson's folder, or a .tar or .tar.gz of it.`);
  const lessons = lessonsOf(plane);
  return found.isDirectory() ? lessons.fromFolder(CLI_ACTOR, target, where) : lessons.upload(CLI_ACTOR, target, createReadStream(where));
}

/** Bytes as the operator reads them: `812 B`, `4.2 kB`, `12.5 MB`. */
export function size(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** A moment as the tables show it: `2026-11-30 08:15` (UTC). */
export const minute = (date: Date | string): string => new Date(date).toISOString().replace('T', ' ').slice(0, 16);

/** `1 file`, `3 files`. */
export const count = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;
