/**
 * Writes the OpenAPI document of the API (api/openapi.ts) to docs/openapi.json: `npm run openapi`
 * after a change of the contract; test/unit/openapi.test.ts fails while the kept file is stale.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { openApiText } from '../api/openapi.ts';
import { PROJECT_ROOT } from '../src/config.ts';

writeFileSync(path.join(PROJECT_ROOT, 'docs/openapi.json'), openApiText());
