import type { AllowlistFile } from '../allowlist/allowlist-file.ts';
import { NotFoundError } from '../errors.ts';
import type { Actor } from './audit.ts';
import type { Mutate } from './mutation.ts';

/**
 * The allowlist's audited edits. The file (`DATA_DIR/allowlist.json`) is the list itself, and the
 * watcher of every running control plane applies its changes; the database holds the audit entry.
 * An edit is made to the file first, inside the transaction that writes its audit entry, so an edit
 * that fails (invalid entry, malformed file, lock) audits nothing; when the audit or the commit then
 * fails, the file edit is undone (best effort: a file cannot be part of a transaction).
 */
export class AllowlistStore {
  private readonly file: AllowlistFile;
  private readonly mutate: Mutate;

  constructor(file: AllowlistFile, mutate: Mutate) {
    this.file = file;
    this.mutate = mutate;
  }

  /** The entries of the file ([] when there is none); throws AllowlistFormatError when it is malformed. */
  entries(): Promise<string[]> {
    return this.file.read();
  }

  /**
   * Adds an email or domain and audits `allowlist.add` (target `{kind: 'allowlist', id: <entry>}`);
   * an entry already there changes nothing, is not audited and answers added: false. Throws
   * ValidationError for an invalid entry.
   */
  add(actor: Actor, input: string): Promise<{ entry: string; added: boolean }> {
    return this.undoable(async () => {
      const result = await this.file.add(input);
      if (!result.added) return { result, undo: undefined };
      return { result, undo: () => this.file.remove(result.entry), action: 'allowlist.add' as const };
    }, actor);
  }

  /**
   * Removes an email or domain and audits `allowlist.remove` (target `{kind: 'allowlist', id:
   * <entry>}`). Throws NotFoundError (`allowlist_entry_not_found`) when the entry is not in the list,
   * ValidationError when invalid.
   */
  remove(actor: Actor, input: string): Promise<{ entry: string; removed: boolean }> {
    return this.undoable(async () => {
      const result = await this.file.remove(input);
      if (!result.removed) throw NotFoundError('allowlist_entry_not_found', `"${result.entry}" is not in the allowlist.`);
      return { result, undo: () => this.file.add(result.entry), action: 'allowlist.remove' as const };
    }, actor);
  }

  /** Runs a file edit in a mutation that audits it (when it changed something), undoing the edit when the transaction fails. */
  private async undoable<T extends { entry: string }>(
    edit: () => Promise<{ result: T; undo: (() => Promise<unknown>) | undefined; action?: 'allowlist.add' | 'allowlist.remove' }>,
    actor: Actor,
  ): Promise<T> {
    let undo: (() => Promise<unknown>) | undefined;
    try {
      return await this.mutate(async () => {
        const made = await edit();
        undo = made.undo;
        const audit = made.action ? { actor, action: made.action, target: { kind: 'allowlist', id: made.result.entry } } : null;
        // Announced to every replica: each reads the file again (AllowlistWatcher).
        return { value: made.result, changed: made.action ? [{ kind: 'allowlist' as const, id: made.result.entry }] : [], audit };
      });
    } catch (error) {
      await undo?.().catch(() => undefined);
      throw error;
    }
  }
}
