/**
 * Issue 41: every setting the control plane reads reaches it from `.env` in the compose deployment.
 * The list is the configuration module's own (VARIABLES in src/config.ts), so a new setting that
 * compose.yaml does not pass fails here; test/unit/compose-replicas.test.ts holds both replicas of
 * compose.replicas.yaml to the same list.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { VARIABLES } from '../../src/config.ts';

const root = path.resolve(import.meta.dirname, '../..');
const control = (parse(readFileSync(path.join(root, 'compose.yaml'), 'utf8')) as { services: { control: { environment: Record<string, string> } } }).services
  .control.environment;

/**
 * Settings the image sets and compose must not pass (an empty value counts as unset, and would undo
 * the image's): NODE_ENV=production, and DATA_DIR=/data, where the deployment's volume is.
 */
const SET_BY_THE_IMAGE = ['NODE_ENV', 'DATA_DIR'];

/** Settings the deployment makes from others: the database's URL, from POSTGRES_PASSWORD and DB_PORT. */
const MADE_BY_THE_DEPLOYMENT = ['DATABASE_URL'];

it('passes the control plane every setting it reads but those the image sets', () => {
  const missing = Object.keys(VARIABLES).filter((name) => !SET_BY_THE_IMAGE.includes(name) && !(name in control));
  expect(missing).toEqual([]);
  expect(SET_BY_THE_IMAGE.filter((name) => name in control)).toEqual([]);
  expect(Object.keys(control).filter((name) => !(name in VARIABLES))).toEqual([]);
});

it('passes each from the .env variable of its own name (a default, or a refusal when it must be set, at most)', () => {
  for (const [name, value] of Object.entries(control).filter(([key]) => !MADE_BY_THE_DEPLOYMENT.includes(key)))
    expect({ [name]: value }).toEqual({ [name]: expect.stringMatching(new RegExp(`^\\$\\{${name}(:-[^}]*|:\\?[^}]*)?\\}$`)) });
});
