/**
 * The panel's types of the API: what openapi-typescript (tools/openapi-typescript, installed by
 * scripts/openapi-tools.sh) makes of the OpenAPI document, as api/panel/client/openapi.d.ts keeps
 * them. The panel calls the API through openapi-fetch typed by them (api/panel/client/api.ts), so a
 * client generated from the document type-checks against every call the panel makes.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/config.ts';

/** Where the panel keeps them. */
export const PANEL_TYPES = path.join(PROJECT_ROOT, 'api/panel/client/openapi.d.ts');

const CLI = path.join(PROJECT_ROOT, 'tools/openapi-typescript/node_modules/openapi-typescript/bin/cli.js');

/** openapi-typescript's types of the document at `documentPath`, under a line that says how they are made. */
export function panelTypes(documentPath: string): string {
  const types = execFileSync(process.execPath, [CLI, documentPath], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return `// Written by \`npm run openapi\` (scripts/write-openapi.ts) from docs/openapi.json; never edited by hand.\n${types}`;
}
