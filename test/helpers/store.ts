import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { createStore, type Store } from '../../src/store/index.ts';

/**
 * The store over a test database, as the control plane makes it: its own change feed, the given
 * environment cap (default 10), and an allowlist file under a fresh temp directory unless given.
 */
export function testStore(db: DataSource, options: { environmentCap?: number; allowlistFile?: AllowlistFile; changes?: ChangeFeed } = {}): Store {
  return createStore({
    db,
    changes: options.changes ?? new ChangeFeed(),
    environmentCap: options.environmentCap ?? 10,
    allowlistFile: options.allowlistFile ?? new AllowlistFile(path.join(mkdtempSync(path.join(os.tmpdir(), 'cp-test-store-')), 'allowlist.json')),
  });
}
