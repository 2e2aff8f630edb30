/**
 * A jest reporter that writes each file's run time (whole seconds, at least 1) into
 * test/durations.json when the run is done, keeping the figures of the files this run did not run
 * and dropping those of files that no longer exist: what test/sequencer.mjs orders the files by.
 * `bash scripts/test-lanes.sh` adds it when TEST_DURATIONS=1 (a whole run, so the figures are
 * taken under the load they are used for).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const FILE = path.join(ROOT, 'test/durations.json');

export default class DurationsReporter {
  seconds = new Map();

  onTestResult(test, result) {
    this.seconds.set(path.relative(ROOT, test.path), Math.max(1, Math.round(result.perfStats.runtime / 1000)));
  }

  onRunComplete() {
    const recorded = existsSync(FILE) ? JSON.parse(readFileSync(FILE, 'utf8')) : {};
    const merged = { ...recorded, ...Object.fromEntries(this.seconds) };
    const kept = Object.keys(merged)
      .filter((file) => existsSync(path.join(ROOT, file)))
      .toSorted();
    writeFileSync(FILE, `${JSON.stringify(Object.fromEntries(kept.map((file) => [file, merged[file]])), null, 2)}\n`);
  }
}
