/**
 * Issue 42: the CLI's `--json` is the API's answer. Every command of `bin/cli` is named here: one
 * with a twin in the admin API prints exactly what that operation answers (checked against the
 * OpenAPI document, api/openapi.ts, as every answer of the integration tests is); one without
 * prints its own wire type (src/wire/schemas.ts) where it has one; the rest say why they have
 * none. A command added without a line here fails the first test. Run in this process on a real
 * PostgreSQL database, as test/integration/cli.test.ts runs them. (backup and restore, which
 * need the engine, are checked the same way in backups.test.ts.)
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import type { TSchema } from 'typebox';
import { OPERATIONS } from '../../api/openapi.ts';
import { COMMANDS } from '../../src/cli/commands.ts';
import { EXIT } from '../../src/cli/command.ts';
import type { Store } from '../../src/store/index.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { cli } from '../helpers/cli.ts';
import { checkAnswer } from '../helpers/contract.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
let env: Record<string, string>;
let store: Store;

/** What each command's --json is: its API twin's answer, its own wire type, or nothing of the API's (and why). */
type Contract = { operation: [method: string, path: string, status: number] } | { schema: TSchema } | { cliOnly: string };
const CONTRACTS: Record<keyof typeof COMMANDS, Contract> = {
  'allowlist:list': { operation: ['GET', '/admin/allowlist', 200] },
  'allowlist:add': { operation: ['POST', '/admin/allowlist', 201] },
  'allowlist:remove': { operation: ['DELETE', '/admin/allowlist/{entry}', 200] },
  'users:list': { operation: ['GET', '/admin/users', 200] },
  'users:promote': { operation: ['POST', '/admin/users/{userId}/promote', 200] },
  'users:demote': { operation: ['POST', '/admin/users/{userId}/demote', 200] },
  'users:delete': { operation: ['DELETE', '/admin/users/{userId}', 200] },
  'users:sign-in-link': { operation: ['POST', '/admin/sign-in-links', 201] },
  'workspaces:stop': { operation: ['POST', '/admin/workspaces/{workspaceId}/stop-containers', 200] },
  'workspaces:restart': { operation: ['POST', '/admin/workspaces/{workspaceId}/restart-code', 200] },
  'cap:get': { operation: ['GET', '/admin/config/max-active-containers', 200] },
  'cap:set': { operation: ['POST', '/admin/config/max-active-containers', 200] },
  'audit:list': { operation: ['GET', '/admin/audit-log', 200] },
  'backups:list': { operation: ['GET', '/admin/backups', 200] },
  restore: { operation: ['POST', '/admin/workspaces/{workspaceId}/restore', 200] },
  status: { schema: Wire.CliStatus },
  'nodes:list': { operation: ['GET', '/admin/nodes', 200] },
  'help:list': { operation: ['GET', '/admin/help', 200] },
  'join-codes:list': { operation: ['GET', '/admin/join-codes', 200] },
  'join-codes:open': { operation: ['POST', '/admin/join-codes', 201] },
  'join-codes:close': { operation: ['POST', '/admin/join-codes/{codeId}/close', 200] },
  usage: { operation: ['GET', '/admin/usage', 200] },
  'lessons:list': { operation: ['GET', '/admin/lessons', 200] },
  'lessons:create': { operation: ['POST', '/admin/lessons', 201] },
  'lessons:update': { operation: ['POST', '/admin/lessons/{lessonId}/versions', 201] },
  'lessons:show': { operation: ['GET', '/admin/lessons/{lessonId}', 200] },
  'lessons:handout': { operation: ['POST', '/admin/lessons/{lessonId}/handout', 202] },
  'lessons:reset': { operation: ['POST', '/admin/lessons/{lessonId}/reset', 202] },
  'lessons:collect': { operation: ['POST', '/admin/lessons/{lessonId}/collections', 202] },
  // The archive goes to the file; the answer is the collection written, as the API shows it.
  'lessons:download': { operation: ['GET', '/admin/lessons/{lessonId}/collections/{collectionId}', 200] },
  backup: { cliOnly: 'writes the backup where it is told (--output FILE, or stdout), not only among the stored ones the API lists' },
  'setup-link': { cliOnly: "the first admin's link, which the API cannot make (no admin to ask for it yet)" },
  'nodes:drain': { cliOnly: 'the panel drains a node through the CLI only' },
  'nodes:undrain': { cliOnly: 'the panel drains a node through the CLI only' },
  'audit-prune': { cliOnly: 'an operator task on the database, with no API' },
};

beforeEach(async () => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-json-'));
  await writeFile(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: ['school.test', 'ada@elsewhere.org'] }));
  env = { DATABASE_URL: db.url, DATA_DIR: dataDir, NODE_ENV: 'test', SERVICE_ADMIN_EMAIL: 'head@school.test', JOIN_CODES: 'on' };
  store = testStore(db.dataSource);
});

/** Runs a command with --json and returns what it printed, failing on anything but success. */
async function json(argv: string[]): Promise<string> {
  const result = await cli([...argv, '--json'], env);
  expect({ argv, code: result.code, stderr: result.stderr }).toEqual({ argv, code: EXIT.ok, stderr: expect.any(String) });
  return result.stdout;
}

/**
 * What a command's printed JSON breaks of its contract: [] when it holds. (Against the OpenAPI
 * document through the contract check, or against its own wire type.)
 */
async function broken(id: keyof typeof COMMANDS, stdout: string): Promise<string[]> {
  const contract = CONTRACTS[id];
  if ('cliOnly' in contract) return [];
  if ('schema' in contract) {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    formats.default(ajv);
    const validate = ajv.compile(contract.schema);
    return validate(JSON.parse(stdout)) ? [] : [`${id}: ${JSON.stringify(validate.errors)}`];
  }
  const [method, template, status] = contract.operation;
  const operation = OPERATIONS.find((candidate) => candidate.method.toUpperCase() === method && candidate.path === template);
  if (operation?.responses[status] === undefined) return [`${id}: ${method} ${template} answers no ${status} in the document`];
  const url = new URL(template.replace(/\{\w+\}/g, 'x'), 'http://127.0.0.1');
  return checkAnswer(method, url, new Response(stdout, { status, headers: { 'content-type': 'application/json' } })).then(
    () => [],
    (error: Error) => [`${id}: ${error.message}`],
  );
}

it('names the contract of every command', () => {
  expect(Object.keys(CONTRACTS).toSorted()).toEqual(Object.keys(COMMANDS).toSorted());
});

it("prints with --json what the command's API twin answers, or its own wire type", async () => {
  const { workspace: ada } = await store.users.create({ email: 'ada@school.test' });
  await store.workspaces.open(ada.id);
  await store.help.raise({ id: null, email: 'ada@school.test' }, ada, 'My robot does not drive');
  await store.users.create({ email: 'bob@school.test' });
  // An admin beside the one promoted and demoted below (the last admin is not demoted).
  await store.users.create({ email: 'head@school.test', role: 'admin' });
  await store.nodes.record([
    { name: 'n1', state: 'ready', availability: 'active', address: '', memoryBytes: 8 * 1024 ** 3, reservedMemoryBytes: 0, nanoCpus: 4e9, reachable: true },
  ]);

  const opened = await store.joinCodes.open({ id: null, email: 'cli' }, { hours: 2 });

  const runs: [keyof typeof COMMANDS, string[]][] = [
    ['allowlist:list', ['allowlist', 'list']],
    ['allowlist:add', ['allowlist', 'add', 'cy@school.org']],
    ['allowlist:remove', ['allowlist', 'remove', 'cy@school.org']],
    ['users:list', ['users', 'list']],
    ['users:promote', ['users', 'promote', 'ada@school.test']],
    ['users:demote', ['users', 'demote', 'ada@school.test']],
    ['users:sign-in-link', ['users', 'sign-in-link', 'ada@school.test']],
    ['workspaces:restart', ['workspaces', 'restart', ada.slug]],
    ['workspaces:stop', ['workspaces', 'stop', ada.slug]],
    ['cap:set', ['cap', 'set', '12']],
    ['cap:get', ['cap', 'get']],
    ['audit:list', ['audit', 'list']],
    ['backups:list', ['backups', 'list']],
    ['status', ['status']],
    ['nodes:list', ['nodes', 'list']],
    ['help:list', ['help', 'list']],
    ['join-codes:open', ['join-codes', 'open', '--hours', '3', '--label', 'Outreach day']],
    ['join-codes:list', ['join-codes', 'list']],
    ['join-codes:close', ['join-codes', 'close', opened.code]],
    ['usage', ['usage', '--since', '2026-01-01']],
    ['users:delete', ['users', 'delete', 'bob@school.test', '--yes']],
  ];
  const breaks: string[] = [];
  for (const [id, argv] of runs) breaks.push(...(await broken(id, await json(argv))));
  const check = async (id: keyof typeof COMMANDS, argv: string[]) => {
    runs.push([id, argv]);
    breaks.push(...(await broken(id, await json(argv))));
  };

  // Lessons, with the lesson controller's part done through the store as it does it (no server runs here).
  const folder = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-json-lesson-'));
  await writeFile(path.join(folder, 'Robot.java'), 'class Robot {}\n');
  await check('lessons:create', ['lessons', 'create', 'Drive Intro', folder]);
  await check('lessons:update', ['lessons', 'update', 'drive intro', folder]);
  await check('lessons:list', ['lessons', 'list']);
  await check('lessons:handout', ['lessons', 'handout', 'Drive Intro', '--student', ada.slug]);
  const [delivery] = await store.lessons.deliveriesOf(ada.id);
  await store.lessons.markDelivered(delivery!, `ws-${ada.slug}-home`);
  await check('lessons:reset', ['lessons', 'reset', 'Drive Intro', ada.slug]);
  await check('lessons:collect', ['lessons', 'collect', 'Drive Intro']);
  await store.lessons.workspacesWithWork();
  const [due] = await store.lessons.snapshotsDue(ada.id);
  await store.lessons.snapshotDone(due!, { state: 'missing' });
  await check('lessons:download', ['lessons', 'download', 'Drive Intro', '--output', path.join(folder, 'collected.tar.gz')]);
  await check('lessons:show', ['lessons', 'show', 'Drive Intro']);
  expect(breaks).toEqual([]);
  // Every command with a contract to hold was run (backup and restore: backups.test.ts).
  const run = new Set(runs.map(([id]) => id));
  const left = Object.entries(CONTRACTS)
    .filter(([id, contract]) => !('cliOnly' in contract) && !run.has(id as keyof typeof COMMANDS))
    .map(([id]) => id);
  expect(left).toEqual(['restore']);
});
