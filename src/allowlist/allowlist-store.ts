import type { DataSource, EntityManager } from 'typeorm';
import { NotFoundError } from '../errors.ts';
import { recordAudit, type Actor } from '../store/audit.ts';
import type { AllowlistFile } from './allowlist-file.ts';

/**
 * Runs `edit` in a transaction. The file is edited first, so an edit that fails (invalid entry,
 * malformed file, lock) writes no audit entry; `edit` audits only what it changed and returns how
 * to undo it. When the audit or the commit then fails, the file edit is undone (best effort: the
 * file cannot be part of the transaction) and the error is passed on.
 */
async function editAudited<T>(db: DataSource, edit: (manager: EntityManager, changed: (undo: () => Promise<unknown>) => void) => Promise<T>): Promise<T> {
  let undo: (() => Promise<unknown>) | undefined;
  try {
    return await db.transaction((manager) => edit(manager, (undoEdit) => (undo = undoEdit)));
  } catch (error) {
    await undo?.().catch(() => undefined);
    throw error;
  }
}

/**
 * Adds an email or domain to the allowlist file and audits `allowlist.add` (target
 * `{kind: 'allowlist', id: <entry>}`) in one transaction; an entry already there changes nothing,
 * is not audited and answers added: false. Throws ValidationError for an invalid entry.
 */
export function addAllowlistEntry(db: DataSource, file: AllowlistFile, actor: Actor, input: string): Promise<{ entry: string; added: boolean }> {
  return editAudited(db, async (manager, changed) => {
    const result = await file.add(input);
    if (!result.added) return result;
    changed(() => file.remove(result.entry));
    await recordAudit(manager, { actor, action: 'allowlist.add', target: { kind: 'allowlist', id: result.entry } });
    return result;
  });
}

/**
 * Removes an email or domain from the allowlist file and audits `allowlist.remove` (target
 * `{kind: 'allowlist', id: <entry>}`) in one transaction. Throws NotFoundError
 * (`allowlist_entry_not_found`) when the entry is not in the list, ValidationError when invalid.
 */
export function removeAllowlistEntry(db: DataSource, file: AllowlistFile, actor: Actor, input: string): Promise<{ entry: string; removed: boolean }> {
  return editAudited(db, async (manager, changed) => {
    const result = await file.remove(input);
    if (!result.removed) throw NotFoundError(`"${result.entry}" is not in the allowlist.`, 'allowlist_entry_not_found');
    changed(() => file.add(result.entry));
    await recordAudit(manager, { actor, action: 'allowlist.remove', target: { kind: 'allowlist', id: result.entry } });
    return result;
  });
}
