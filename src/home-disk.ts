/**
 * The bound on each workspace's home (HOME_DISK_LIMIT), as its student, the coach and a run's
 * refusal see it: from the home's last measure (the stats sampler's, every HOME_DISK_CHECK_SECONDS
 * while its editor runs) and the limit, how full it is and what to say. A measured bound, not a
 * quota: see docs/security.md, "Disk".
 */
import { ConflictError, type AppError } from './errors.ts';

/** From this share of the limit on, the student is told that their home is nearly full. */
export const HOME_DISK_NEAR = 0.9;

/** The bound on homes: HOME_DISK_LIMIT (0: none) and how often a running home is measured. */
export interface HomeDiskLimit {
  limitBytes: number;
  checkMs: number;
}

/** A home's last measure. */
export interface HomeDiskUsage {
  /** The space its files take on disk. */
  usedBytes: number;
  /** Why part of it could not be measured, in its student's words (then `usedBytes` is what could be); null: all of it was. */
  problem: string | null;
  measuredAt: Date;
}

/**
 * How full a home is: `ok`, `near` (at least HOME_DISK_NEAR of the limit), `full` (at the limit or
 * past it), or `unmeasured` (part of it could not be measured, and what could is under the limit).
 */
export type HomeDiskLevel = 'ok' | 'near' | 'full' | 'unmeasured';

/** A home against its limit, and what its student is told (null when nothing: `ok`). */
export interface HomeDiskStatus {
  usedBytes: number;
  limitBytes: number;
  measuredAt: Date;
  level: HomeDiskLevel;
  message: string | null;
}

/** A size as people read it: `812 MiB`, `4.6 GiB`. */
export function formatBytes(bytes: number): string {
  const mib = bytes / 1024 / 1024;
  if (mib < 1024) return `${mib < 10 ? mib.toFixed(1) : Math.round(mib)} MiB`;
  const gib = mib / 1024;
  return `${gib < 100 ? gib.toFixed(1) : Math.round(gib)} GiB`;
}

/** How often homes are measured, in words (`every minute`, `every 30 seconds`). */
function every(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds === 60) return 'every minute';
  if (seconds % 60 === 0) return `every ${seconds / 60} minutes`;
  return seconds === 1 ? 'every second' : `every ${seconds} seconds`;
}

/** How full a home is against the bound, and what to tell its student; null when there is no bound or no measure yet. */
export function homeDiskStatus(usage: HomeDiskUsage | undefined, bound: HomeDiskLimit): HomeDiskStatus | null {
  if (!usage || bound.limitBytes === 0) return null;
  const { usedBytes, problem, measuredAt } = usage;
  const limitBytes = bound.limitBytes;
  const uses = `it uses ${formatBytes(usedBytes)} of the ${formatBytes(limitBytes)} it may use`;
  const free = 'Delete files you no longer need (in the terminal, ./gradlew clean removes build outputs)';
  const again = `it is measured again ${every(bound.checkMs)}`;
  const status = { usedBytes, limitBytes, measuredAt };
  if (usedBytes >= limitBytes)
    return {
      ...status,
      level: 'full',
      message: `Your home folder is full: ${uses}, so Run is refused until you free space. ${free}, then press Run again: ${again}.`,
    };
  if (problem !== null)
    return {
      ...status,
      level: 'unmeasured',
      message: `Your home folder could not be measured in full: ${problem}. Run is refused until it can be; press Run again once that is fixed: ${again}.`,
    };
  if (usedBytes >= limitBytes * HOME_DISK_NEAR)
    return {
      ...status,
      level: 'near',
      message: `Your home folder is nearly full: ${uses}. ${free}: at ${formatBytes(limitBytes)}, Run is refused until you do.`,
    };
  return { ...status, level: 'ok', message: null };
}

/**
 * The refusal of a new run for a home that is full or could not be measured in full (409
 * `home_disk_full`, its message saying how much is used and how to free it); undefined otherwise.
 */
export function homeDiskRefusal(status: HomeDiskStatus | null): AppError | undefined {
  if (status?.level !== 'full' && status?.level !== 'unmeasured') return undefined;
  return ConflictError('home_disk_full', status.message!);
}
