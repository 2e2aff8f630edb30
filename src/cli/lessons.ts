/**
 * What the `lessons` commands share: the Lessons service over the CLI's store and DATA_DIR (the
 * API's, made the same way: api/app.ts), a lesson's files read from a folder or an archive on this
 * machine, and sizes as the operator reads them. What reaches homes is the running server's lesson
 * controller's (controllers/lessons.ts): the commands only record what is wanted.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { NotFoundError, ValidationError } from '../errors.ts';
import { Imports } from '../import/imports.ts';
import { Lessons } from '../lessons/lessons.ts';
import { createRootLogger } from '../log.ts';
import { createMetrics } from '../metrics.ts';
import { CLI_ACTOR } from '../store/audit.ts';
import type { LessonRecord } from '../store/lessons.ts';
import type { CliPlane } from './command.ts';

/** The Lessons service of a CLI plane (loaded only by the lessons commands: tar and its checks are not every command's), with the imports' clones for a lesson from git. */
export function lessonsOf(plane: CliPlane): Lessons {
  const { config, store, backups } = plane;
  // A lesson's clone says nothing in the log (its failure is the command's error).
  const log = createRootLogger({ level: 'fatal', format: 'json', colour: false });
  const imports = new Imports({ store, backups, limits: config.imports, dataDir: config.dataDir, log, metrics: createMetrics() });
  return new Lessons({ lessons: store.lessons, dataDir: config.dataDir, maxBytes: config.lessonMaxBytes, imports });
}

/** Where a lesson's files come from: a path on this machine, or a git repository's address with its branch and folder. */
export interface LessonSource {
  source: string;
  branch?: string;
  subfolder?: string;
}

/**
 * Makes a lesson (`{ name }`) or its next version (`{ lessonId }`) of `source`, as actor `cli`
 * (audit `lesson.create`): an `https://` address is a git repository, cloned as the API's
 * POST /admin/lessons/git clones it (its branch and folder); a folder is packed as it is
 * (Lessons.fromFolder), a file is read as an uploaded .zip, .tar or .tar.gz (Lessons.upload), each
 * checked as the API checks an upload; 404 `lesson_source_not_found` when nothing is at the path,
 * 400 `invalid_flags` for a branch or folder of something that is no repository.
 */
export async function lessonFrom(plane: CliPlane, target: { name: string } | { lessonId: string }, from: LessonSource): Promise<LessonRecord> {
  const { source } = from;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source))
    return lessonsOf(plane).fromGit(CLI_ACTOR, target, { url: source, branch: from.branch, subfolder: from.subfolder });
  if (from.branch !== undefined || from.subfolder !== undefined)
    throw ValidationError('invalid_flags', '--branch and --subfolder are for a git repository: give its https:// address instead of a path.');
  const where = path.resolve(source);
  const found = await stat(where).catch(() => undefined);
  if (!found || !(found.isDirectory() || found.isFile()))
    throw NotFoundError(
      'lesson_source_not_found',
      `No folder or file at ${JSON.stringify(source)}: give the lesson's folder, or a .zip, .tar or .tar.gz of it.`,
    );
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
