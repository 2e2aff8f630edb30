/**
 * Writes the OpenAPI document of the API (api/openapi.ts) to docs/openapi.json, and the panel's
 * types of it (what openapi-typescript makes of the document) to api/panel/client/openapi.d.ts:
 * `npm run openapi` after a change of the contract; test/unit/openapi.test.ts fails while either
 * kept file is stale.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { openApiText } from '../api/openapi.ts';
import { PROJECT_ROOT } from '../src/config.ts';
import { panelTypes, PANEL_TYPES } from './panel-types.ts';

const document = path.join(PROJECT_ROOT, 'docs/openapi.json');
writeFileSync(document, openApiText());
execFileSync('bash', [path.join(PROJECT_ROOT, 'scripts/openapi-tools.sh')], { stdio: 'inherit' });
writeFileSync(PANEL_TYPES, panelTypes(document));
