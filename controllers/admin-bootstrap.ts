import type { Logger } from '../src/log.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import type { UserStore } from '../src/store/users.ts';

/**
 * At start-up, promotes the existing accounts named in SERVICE_ADMIN_EMAIL that are not admins yet
 * (audit `user.promote`, actor `system`). Emails without an account become admin at their first
 * sign-in instead. Returns the emails promoted.
 */
export async function promoteConfiguredAdmins(users: UserStore, emails: readonly string[], log: Logger): Promise<string[]> {
  const promoted: string[] = [];
  for (const email of emails) {
    const user = await users.getByEmail(email);
    if (!user || user.role === 'admin') continue;
    const { changed } = await users.promote(SYSTEM_ACTOR, user.id);
    if (changed) {
      promoted.push(email);
      log.info({ userId: user.id, email }, 'promoted to admin: listed in SERVICE_ADMIN_EMAIL');
    }
  }
  return promoted;
}
