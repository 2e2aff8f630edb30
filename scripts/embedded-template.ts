/**
 * `npm install`'s last step (postinstall): makes the embedded database's initdb template
 * (src/db/embedded-template.ts), so that a first `npm start` does not wait for initdb. Never fails
 * the install: without the template, a new embedded database runs initdb as before.
 */
import { writeTemplate } from '../src/db/embedded-template.ts';

const started = performance.now();
try {
  const file = await writeTemplate();
  console.log(`embedded database template: ${file} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
} catch (error) {
  console.warn(`embedded database template not made (a new embedded database will run initdb instead): ${(error as Error).message}`);
}
