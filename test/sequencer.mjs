/**
 * Orders the test files longest first, by the seconds test/durations.json records for each (a file
 * it does not name counts as DEFAULT_SECONDS), so that the workers finish close together: each takes
 * the longest file left whenever it is free. The figures come from a whole run
 * (`bash scripts/test-durations.sh`); they only order the files, so a stale one costs time, never a
 * result. Loaded by jest as it is (a sequencer is not transformed), hence plain JavaScript.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import Sequencer from '@jest/test-sequencer';

/** A file's seconds when test/durations.json does not name it (a new file): early, not first. */
const DEFAULT_SECONDS = 20;
const ROOT = path.resolve(import.meta.dirname, '..');
const durations = JSON.parse(readFileSync(path.join(ROOT, 'test/durations.json'), 'utf8'));

export default class LongestFirst extends Sequencer {
  sort(tests) {
    const seconds = (test) => durations[path.relative(ROOT, test.path)] ?? DEFAULT_SECONDS;
    return tests.toSorted((a, b) => seconds(b) - seconds(a) || a.path.localeCompare(b.path));
  }
}
