/**
 * `npm install`'s last step (postinstall): makes the embedded database's template, a cluster with
 * the migrations applied (src/db/embedded-template.ts), so that a first `npm start` waits for
 * neither initdb nor the migrations. Never fails the install: without the template, a new embedded
 * database runs initdb and the migrations as before.
 */
import { migrateAt } from '../src/db/database.ts';
import { writeTemplate } from '../src/db/embedded-template.ts';

const started = performance.now();
try {
  const file = await writeTemplate(async (url) => void (await migrateAt(url)));
  console.log(`embedded database template: ${file} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
} catch (error) {
  console.warn(`embedded database template not made (a new embedded database will run initdb instead): ${(error as Error).message}`);
}
