import type { Backups } from '../src/backup/backups.ts';
import { engineAway, names, type RuntimeEnvironment, type VolumeArchives } from '../src/docker/runtime.ts';
import { AppError } from '../src/errors.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import type { Store } from '../src/store/index.ts';
import type { JoinCodeRecord, JoinGuest } from '../src/store/join-codes.ts';
import { passFailed } from './periodic.ts';

/** How often the expiry looks for codes that expired (a close wakes it at once). Guests may no longer act from the expiry itself (api/policy.ts). */
export const JOIN_EXPIRY_CHECK_MS = 30_000;

export interface JoinCodeExpiryOptions {
  store: Pick<Store, 'joinCodes' | 'users' | 'workspaces' | 'changes'>;
  backups: Pick<Backups, 'create'>;
  runtime: Pick<VolumeArchives, 'volumeExists'> & Pick<RuntimeEnvironment, 'reachability'>;
  metrics: Metrics;
  /** Logger of `control.joins`. */
  log: Logger;
  /** How often it looks (default JOIN_EXPIRY_CHECK_MS). */
  checkEveryMs?: number;
}

/** What one reconcile of a guest did. */
export type GuestOutcome = 'removed' | 'removed-without-home' | 'backup-failed';

/** What one reconcile of a due code did: each guest's outcome, and whether the code is handled now. */
export interface CodeOutcome {
  codeId: string;
  guests: { userId: string; outcome: GuestOutcome; backup?: string }[];
  handled: boolean;
}

/**
 * The expiry of join codes, on the leader (issue 43, item 5). A code is due once it expired or a
 * coach closed it, until it is handled. Reconciling a due code, for each of its guests still there:
 * their home (when it exists) is backed up (Backups.create, as `system`, audited `workspace.backup`
 * as the scheduled backups are), the backup is recorded on the code, then the guest is deleted the
 * way `cli users delete` does (UserStore.delete: audited `user.delete`, their sessions end, their
 * workspace is marked deleted and the workspace controller removes its containers and volume). A
 * guest whose workspace never had a home is deleted with nothing to back up. A failed backup leaves
 * that guest in place (never deleted without a backup), logs a warning, counts
 * `join_code_guests_removed_total{outcome="backup_failed"}`, and is tried again at the next pass.
 * Once no guest is left the code is marked handled (audited `join_code.expire`, naming the backups).
 * Every step is idempotent, so a restart (or a new leader) mid-way resumes where the last stopped: a
 * guest backed up but not yet deleted is backed up again. Woken every JOIN_EXPIRY_CHECK_MS and by
 * every `join_codes` change (a close); one pass at a time.
 */
export class JoinCodeExpiry {
  private readonly options: JoinCodeExpiryOptions;
  private readonly onError: (error: unknown) => void;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private running: Promise<void> | undefined;
  /** A wake came while a pass ran: one more pass follows it. */
  private again = false;
  /** Started and not stopped: wakes run passes. */
  private active = false;
  /** Stopping: the pass under way ends after the code it is at. */
  private halting = false;

  constructor(options: JoinCodeExpiryOptions) {
    this.options = options;
    this.onError = passFailed(options.log, 'join code expiry', (error) => engineAway(options.runtime, error));
  }

  start(): void {
    this.active = true;
    this.halting = false;
    this.unsubscribe = this.options.store.changes.subscribe((change) => {
      if (change.kind === 'join_codes') this.wake();
    });
    this.timer = setInterval(() => this.wake(), this.options.checkEveryMs ?? JOIN_EXPIRY_CHECK_MS);
    this.timer.unref();
    this.wake();
  }

  /** Stops waking, and waits for a pass under way. */
  async stop(): Promise<void> {
    this.active = false;
    this.halting = true;
    this.unsubscribe?.();
    clearInterval(this.timer);
    await this.running;
  }

  /** Runs a pass now, or one more after the pass under way. */
  private wake(): void {
    if (!this.active) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .then(() => undefined, this.onError)
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** One pass: every due code reconciled, oldest expiry first. */
  async pass(): Promise<CodeOutcome[]> {
    const outcomes: CodeOutcome[] = [];
    for (const code of await this.options.store.joinCodes.due()) {
      if (this.halting) break;
      outcomes.push(await this.reconcile(code));
    }
    return outcomes;
  }

  /** Reconciles one due code (see the class comment): its guests backed up and removed, then the code marked handled. */
  async reconcile(code: JoinCodeRecord): Promise<CodeOutcome> {
    const { store, log } = this.options;
    const guests: CodeOutcome['guests'] = [];
    for (const guest of code.guests) guests.push({ userId: guest.userId, ...(await this.removeGuest(code, guest)) });
    const handled = guests.every((guest) => guest.outcome !== 'backup-failed') && (await store.joinCodes.markHandled(SYSTEM_ACTOR, code.id));
    if (handled) {
      const backups = (await store.joinCodes.get(code.id))?.backups ?? [];
      log.info(
        { joinCodeId: code.id, code: code.code, guests: code.joined, backups },
        `join code ${code.code} ${code.state}: its guests were backed up and removed`,
      );
    }
    return { codeId: code.id, guests, handled };
  }

  /** One guest: their home backed up (when there is one), recorded on the code, then the guest deleted; a failed backup keeps them. */
  private async removeGuest(code: JoinCodeRecord, guest: JoinGuest): Promise<{ outcome: GuestOutcome; backup?: string }> {
    const { store, backups, runtime, metrics, log } = this.options;
    const where = { joinCodeId: code.id, userId: guest.userId, workspaceId: guest.workspaceId, slug: guest.workspaceSlug };
    const workspace = guest.workspaceId ? await store.workspaces.get(guest.workspaceId) : undefined;
    let backup: string | undefined;
    if (workspace && (await runtime.volumeExists(names.home(workspace)))) {
      try {
        backup = (await backups.create(SYSTEM_ACTOR, workspace)).name!;
      } catch (error) {
        // The engine away: no home can be backed up now; the pass ends and the next tries again.
        if (engineAway(runtime, error)) throw error;
        metrics.joinCodeGuests.inc({ outcome: 'backup_failed' });
        log.warning({ ...where, error }, `backing up guest ${guest.name}'s home (${guest.workspaceSlug}) failed: the guest is kept, and tried again`);
        return { outcome: 'backup-failed' };
      }
      await store.joinCodes.recordBackup(code.id, backup);
    }
    await store.users.delete(SYSTEM_ACTOR, guest.userId).catch((error: unknown) => {
      // Deleted meanwhile (a coach, by hand): gone is what was wanted.
      if (!(error instanceof AppError && error.code === 'user_not_found')) throw error;
    });
    metrics.joinCodeGuests.inc({ outcome: 'removed' });
    log.info(
      { ...where, backup: backup ?? null },
      `removed guest ${guest.name} of join code ${code.code}${backup ? ` after backing up their home as ${backup}` : ' (no home to back up)'}`,
    );
    return backup ? { outcome: 'removed', backup } : { outcome: 'removed-without-home' };
  }
}
