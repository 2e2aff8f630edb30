/**
 * The operator CLI's commands, run in this process as `bin/cli` runs them, on a real PostgreSQL
 * database: what each prints on stdout (tables, or JSON with --json), what it says on stderr when it
 * fails (one line, or one JSON object), its exit code, what it changes and audits (actor `cli`), and
 * that each change is announced (NOTIFY) for a running server.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { COMMANDS } from '../../src/cli/commands.ts';
import { EXIT } from '../../src/cli/command.ts';
import { ChangeFeed, type Change } from '../../src/db/changes.ts';
import { PRUNE_BATCH } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { cli } from '../helpers/cli.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { testStore } from '../helpers/store.ts';
import { categoryLogger } from '../../src/log.ts';

/** What the CLI adds to a change when no server runs (none does in this file: commands run in this process). */
const UNATTENDED = ' No control plane is running to act on it: it takes effect when the server starts.';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { RECONCILER_LEASE } from '../../src/store/leases.ts';

const db = useTestDatabase();
let env: Record<string, string>;
let store: Store;
let dataDir: string;

beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-'));
  env = { DATABASE_URL: db.url, DATA_DIR: dataDir, NODE_ENV: 'test' };
  store = testStore(db.dataSource, { allowlistFile: new AllowlistFile(path.join(dataDir, 'allowlist.json')) });
});

interface AuditRow {
  actor_id: string | null;
  actor_email: string;
  action: string;
  target_id: string;
  metadata: Record<string, unknown> | null;
}
const audit = async (): Promise<AuditRow[]> => db.dataSource.query('SELECT actor_id, actor_email, action, target_id, metadata FROM audit_log ORDER BY id');

/** A user (with a stopped workspace) made through the store, as a first sign-in makes one. */
const user = async (email: string, role: 'user' | 'admin' = 'user') => (await store.users.create({ email, role })).user;

/** The change feed of another process LISTENing on the test database (a running server's). */
async function listening(): Promise<{ changes: Change[]; close(): Promise<void> }> {
  const feed = new ChangeFeed();
  const logger = captureLogger();
  feed.listen(db.url, categoryLogger(logger.root, 'db'));
  await eventually('listener connected', async () => logger.records.some((record) => record.message === 'change listener connected'));
  const changes: Change[] = [];
  feed.subscribe((change) => changes.push(change));
  return { changes, close: () => feed.close() };
}

describe('allowlist', () => {
  it('adds a normalised entry to the file, audits it with actor cli, and says so on stdout', async () => {
    const result = await cli(['allowlist', 'add', ' Ana@School.org '], env);
    expect(result).toEqual({ code: EXIT.ok, stdout: 'Added ana@school.org to the allowlist.\n', stderr: '' });
    expect(JSON.parse(await readFile(path.join(dataDir, 'allowlist.json'), 'utf8'))).toEqual({ entries: ['ana@school.org'] });
    expect(await audit()).toEqual([{ actor_id: null, actor_email: 'cli', action: 'allowlist.add', target_id: 'ana@school.org', metadata: null }]);
    expect(await cli(['allowlist', 'add', 'ana@school.org'], env)).toMatchObject({ code: EXIT.ok, stdout: 'ana@school.org is already on the allowlist.\n' });
  });

  it('lists the file and the SERVICE_ADMIN_EMAIL emails as a table, and as JSON with --json', async () => {
    await cli(['allowlist', 'add', 'school.org'], env);
    const withAdmins = { ...env, SERVICE_ADMIN_EMAIL: 'head@school.org' };
    const table = await cli(['allowlist', 'list'], withAdmins);
    expect(table.stdout.split('\n')).toEqual([
      'ENTRY            KIND    SOURCE',
      'school.org       domain  file',
      'head@school.org  email   SERVICE_ADMIN_EMAIL',
      '',
    ]);
    const json = await cli(['allowlist', 'list', '--json'], withAdmins);
    // As GET /admin/allowlist answers (test/integration/cli-json.test.ts).
    expect(JSON.parse(json.stdout)).toEqual({ entries: ['school.org'], implicit: ['head@school.org'] });
  });

  it('says what to do when the list is empty', async () => {
    expect((await cli(['allowlist', 'list'], env)).stdout).toBe('No one is on the allowlist: add an email or a domain with `allowlist add`.\n');
  });

  it('refuses a malformed entry with exit 2 and one line on stderr, changing nothing', async () => {
    const result = await cli(['allowlist', 'add', 'a@b@school.org'], env);
    expect(result).toEqual({ code: EXIT.usage, stdout: '', stderr: 'Error: Invalid allowlist entry: "a@b@school.org" has more than one \'@\'.\n' });
    expect(await audit()).toEqual([]);
  });

  it('removes an entry (audited), and answers exit 3 for one that is not there', async () => {
    await cli(['allowlist', 'add', 'school.org'], env);
    expect(await cli(['allowlist', 'remove', 'school.org'], env)).toMatchObject({ code: EXIT.ok, stdout: 'Removed school.org from the allowlist.\n' });
    expect((await audit()).map((row) => row.action)).toEqual(['allowlist.add', 'allowlist.remove']);
    const missing = await cli(['allowlist', 'remove', 'school.org', '--json'], env);
    expect(missing).toEqual({
      code: EXIT.notFound,
      stdout: '',
      stderr: `${JSON.stringify({ error: { code: 'allowlist_entry_not_found', message: '"school.org" is not in the allowlist.' } })}\n`,
    });
  });

  it('refuses to edit a malformed file (exit 4), which someone is editing by hand', async () => {
    await writeFile(path.join(dataDir, 'allowlist.json'), '{"entries": [');
    const result = await cli(['allowlist', 'add', 'school.org'], env);
    expect(result.code).toBe(EXIT.refused);
    expect(result.stderr).toMatch(/^Error: The allowlist file is not valid; fix it first: .*\n$/);
  });
});

describe('users', () => {
  it('lists ID, name, email, role and workspace slug', async () => {
    const ada = await user('ada@school.test', 'admin');
    const result = await cli(['users', 'list'], env);
    expect(result.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+EMAIL\s+ROLE\s+WORKSPACE$/);
    expect(result.stdout).toContain(`${ada.id}  —     ada@school.test  admin  ada`);
    expect(JSON.parse((await cli(['users', 'list', '--json'], env)).stdout)).toEqual({
      users: [{ id: ada.id, name: '', email: 'ada@school.test', role: 'admin', workspaceId: ada.workspaceId, workspaceSlug: 'ada' }],
    });
  });

  it('promotes a user (audited, announced to a running server at once)', async () => {
    const ada = await user('ada@school.test');
    const server = await listening();
    try {
      expect(await cli(['users', 'promote', 'Ada@School.test'], env)).toMatchObject({ code: EXIT.ok, stdout: 'ada@school.test is now an admin.\n' });
      await eventually('the change heard', async () => server.changes.some((change) => change.kind === 'users' && change.id === ada.id), 5000);
    } finally {
      await server.close();
    }
    expect(await audit()).toEqual([{ actor_id: null, actor_email: 'cli', action: 'user.promote', target_id: ada.id, metadata: { email: 'ada@school.test' } }]);
  });

  it('refuses to promote someone who never signed in (exit 3)', async () => {
    const result = await cli(['users', 'promote', 'nobody@school.test'], env);
    expect(result).toEqual({ code: EXIT.notFound, stdout: '', stderr: 'Error: No user "nobody@school.test"; a user exists once they have signed in.\n' });
  });

  it('refuses to demote the last admin (exit 4) and demotes another', async () => {
    await user('head@school.test', 'admin');
    const last = await cli(['users', 'demote', 'head@school.test', '--json'], env);
    expect(last.code).toBe(EXIT.refused);
    expect(JSON.parse(last.stderr)).toEqual({
      error: { code: 'last_admin', message: 'head@school.test is the last admin and cannot be demoted; promote someone else first.' },
    });
    await user('coach@school.test', 'admin');
    expect(await cli(['users', 'demote', 'coach@school.test'], env)).toMatchObject({ code: EXIT.ok, stdout: 'coach@school.test is no longer an admin.\n' });
  });

  it('refuses to delete without --yes when there is no terminal to ask on, deleting nothing', async () => {
    const ada = await user('ada@school.test');
    const result = await cli(['users', 'delete', 'ada@school.test'], env);
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toBe('Error: Delete ada@school.test and their workspace ada with all its files? Add --yes to confirm without a terminal.\n');
    expect(await store.users.get(ada.id)).toBeDefined();
  });

  it('deletes a user with --yes: the account goes and the workspace is marked for removal (audited)', async () => {
    const ada = await user('ada@school.test');
    const result = await cli(['users', 'delete', 'ada@school.test', '--yes'], env);
    expect(result).toMatchObject({ code: EXIT.ok, stdout: `Deleted ada@school.test; workspace ada and its files are being removed.${UNATTENDED}\n` });
    expect(await store.users.get(ada.id)).toBeUndefined();
    expect((await store.workspaces.get(ada.workspaceId!))?.spec.desiredState).toBe('deleted');
    expect((await audit()).map((row) => row.action)).toEqual(['user.delete']);
  });
});

describe('one-time links', () => {
  const LINK = /^(http:\/\/school\.test:8443\/auth\/link\/[A-Za-z0-9_-]{43})\nSigns in ana@school\.org once, until (\S+)\. /;

  it('makes a sign-in link for an allowlisted email under PUBLIC_URL (audited), whose token is stored hashed only', async () => {
    await cli(['allowlist', 'add', 'school.org'], env);
    const result = await cli(['users', 'sign-in-link', 'Ana@School.org', '--expires-in', '90'], { ...env, PUBLIC_URL: 'http://school.test:8443' });
    expect(result).toMatchObject({ code: EXIT.ok, stderr: '' });
    const [, url, until] = LINK.exec(result.stdout)!;
    expect(Date.parse(until!) - Date.now()).toBeGreaterThan(89 * 60_000);
    const token = url!.split('/').at(-1)!;
    expect(await db.dataSource.query('SELECT email FROM sign_in_links WHERE token_hash = encode(sha256($1::bytea), $2)', [token, 'hex'])).toEqual([
      { email: 'ana@school.org' },
    ]);
    expect((await audit()).at(-1)).toMatchObject({ actor_email: 'cli', action: 'auth.sign-in-link', metadata: { email: 'ana@school.org' } });
    const json = await cli(['users', 'sign-in-link', 'ana@school.org', '--json'], env);
    expect(JSON.parse(json.stdout)).toEqual({
      link: {
        id: expect.any(String),
        email: 'ana@school.org',
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:8080\/auth\/link\//),
        expiresAt: expect.any(String),
      },
    });
  });

  it('refuses an email off the allowlist (exit 4) and an expiry out of range (exit 2), making nothing', async () => {
    expect(await cli(['users', 'sign-in-link', 'eve@elsewhere.org'], env)).toEqual({
      code: EXIT.refused,
      stdout: '',
      stderr: 'Error: eve@elsewhere.org is not on the allowlist: add it (or its domain) first.\n',
    });
    expect((await cli(['users', 'sign-in-link', 'eve@elsewhere.org', '--expires-in', '0'], env)).code).toBe(EXIT.usage);
    expect(await db.dataSource.query('SELECT * FROM sign_in_links')).toEqual([]);
  });

  it('prints a new setup link while no admin exists, and refuses once one does', async () => {
    const first = await cli(['setup-link'], env);
    expect(first).toMatchObject({ code: EXIT.ok, stderr: '' });
    expect(first.stdout).toMatch(
      /^http:\/\/127\.0\.0\.1:8080\/auth\/setup\/[A-Za-z0-9_-]{43}\nWhoever opens it first, until \S+, becomes the first admin\.\n$/,
    );
    await user('head@school.org', 'admin');
    expect(await cli(['setup-link'], env)).toEqual({
      code: EXIT.refused,
      stdout: '',
      stderr: 'Error: An admin exists already: sign in, or make a sign-in link with "users sign-in-link <email>".\n',
    });
  });
});

describe('workspaces, status and the cap', () => {
  it('stops a workspace by slug or by its owner email (audited container.stop), and answers exit 3 for an unknown one', async () => {
    const ada = await user('ada@school.test');
    await store.workspaces.open(ada.workspaceId!);
    expect(await cli(['workspaces', 'stop', 'ada@school.test'], env)).toMatchObject({ code: EXIT.ok, stdout: `Workspace ada is set to stop.${UNATTENDED}\n` });
    expect((await store.workspaces.get(ada.workspaceId!))?.spec.desiredState).toBe('stopped');
    expect((await audit()).map((row) => [row.actor_email, row.action])).toEqual([['cli', 'container.stop']]);
    expect((await cli(['workspaces', 'stop', 'nobody'], env)).code).toBe(EXIT.notFound);
    // An email is compared as users are (any case); a NUL names no one (never a database error).
    expect((await cli(['workspaces', 'stop', 'ADA@School.Test'], env)).code).toBe(EXIT.ok);
    expect(await cli(['workspaces', 'stop', 'ada\u0000'], env)).toMatchObject({ code: EXIT.notFound, stderr: expect.stringContaining('No workspace') });
  });

  it('restarts a running workspace, and refuses a stopped one (exit 4)', async () => {
    const ada = await user('ada@school.test');
    expect(JSON.parse((await cli(['workspaces', 'restart', 'ada', '--json'], env)).stderr).error.code).toBe('workspace_not_running');
    await store.workspaces.open(ada.workspaceId!);
    const result = await cli(['workspaces', 'restart', 'ada', '--json'], env);
    expect(result.code).toBe(EXIT.ok);
    expect(JSON.parse(result.stdout)).toEqual({ workspace: expect.objectContaining({ id: ada.workspaceId, slug: 'ada', restartGeneration: 1 }) });
  });

  it('shows the capacity and every workspace', async () => {
    const ada = await user('ada@school.test');
    await user('bob@school.test');
    await store.workspaces.open(ada.workspaceId!);
    const table = await cli(['status'], { ...env, MAX_ACTIVE_CONTAINERS: '7' });
    const lines = table.stdout.split('\n').slice(1);
    expect(table.stdout.split('\n')[0]).toBe('No control plane is running: the observed states below are as a server last saw them.');
    expect(lines[0]).toBe('Capacity: 0 running, 1 wanted running, cap 7 (MAX_ACTIVE_CONTAINERS); 0 active builds.');
    expect(lines[1]).toMatch(/^SLUG\s+OWNER\s+WANTED\s+OBSERVED\s+LAST ACTIVE\s+MESSAGE$/);
    expect(lines[2]).toMatch(/^ada\s+ada@school\.test\s+running\s+unknown\s+\ds ago\s*$/);
    const json = JSON.parse((await cli(['status', '--json'], env)).stdout) as { capacity: unknown; workspaces: { slug: string; owner: string }[] };
    expect(json.capacity).toEqual({ cap: 10, source: 'environment', wantedRunning: 1, running: 0, activeBuilds: 0 });
    expect(json.workspaces.map((workspace) => [workspace.slug, workspace.owner])).toEqual([
      ['ada', 'ada@school.test'],
      ['bob', 'bob@school.test'],
    ]);
  });

  it('names the servers running and the one that leads, with its term', async () => {
    const one = { id: '00000000-0000-4000-8000-000000000001', publicUrl: 'http://a.test', hostname: 'host-a', pid: 101, pidNamespace: 'pid:[1]' };
    const two = { id: '00000000-0000-4000-8000-000000000002', publicUrl: 'http://b.test', hostname: 'host-b', pid: 202, pidNamespace: 'pid:[2]' };
    await store.servers.heartbeat(one);
    await store.servers.heartbeat(two);
    try {
      expect((await cli(['status'], env)).stdout.split('\n')[0]).toBe('Servers: 2 running; none leads now (another takes the lease within seconds).');
      await store.leases.acquire(RECONCILER_LEASE, two.id, 60_000);
      expect((await cli(['status'], env)).stdout.split('\n')[0]).toBe('Servers: 2 running; the leader (running the controllers) is host-b pid 202, term 1.');
      const json = JSON.parse((await cli(['status', '--json'], env)).stdout) as { servers: { hostname: string; leader: boolean }[]; leaseTerm: number | null };
      expect(json.servers.map((server) => [server.hostname, server.leader]).toSorted((x, y) => String(x[0]).localeCompare(String(y[0])))).toEqual([
        ['host-a', false],
        ['host-b', true],
      ]);
      expect(json.leaseTerm).toBe(1);
    } finally {
      await store.leases.release(RECONCILER_LEASE, two.id, 1);
      await store.servers.unregister(one.id);
      await store.servers.unregister(two.id);
    }
  });

  it('sets the cap (audited, announced) and reads it back; refuses a value that is not a whole number in range', async () => {
    const server = await listening();
    try {
      expect(await cli(['cap', 'set', '25'], env)).toMatchObject({ code: EXIT.ok, stdout: 'The cap is 25 (was 10).\n' });
      await eventually('the change heard', async () => server.changes.some((change) => change.kind === 'settings'), 5000);
    } finally {
      await server.close();
    }
    expect(JSON.parse((await cli(['cap', 'get', '--json'], env)).stdout)).toEqual({ value: 25, source: 'override' });
    for (const bad of ['-1', '10001', 'ten', '2.5']) {
      const result = await cli(['cap', 'set', bad], env);
      expect({ bad, code: result.code, stdout: result.stdout }).toEqual({ bad, code: EXIT.usage, stdout: '' });
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
    }
    expect((await audit()).map((row) => row.metadata)).toEqual([{ from: 10, to: 25 }]);
  });
});

describe('nodes', () => {
  const swarm = () => ({ ...env, RUNTIME: 'swarm', SWARM_ENGINES: 'unix:///run/classroom/n1.sock' });
  const record = () =>
    store.nodes.record([
      {
        name: 'n1',
        state: 'ready',
        availability: 'active',
        address: '10.0.0.1',
        memoryBytes: 8 * 1024 ** 3,
        reservedMemoryBytes: 2 * 1024 ** 3,
        nanoCpus: 4e9,
        reachable: true,
      },
      {
        name: 'n2',
        state: 'down',
        availability: 'active',
        address: '10.0.0.2',
        memoryBytes: 8 * 1024 ** 3,
        reservedMemoryBytes: 0,
        nanoCpus: 4e9,
        reachable: false,
      },
    ]);

  it('lists the nodes as the leader recorded them, with their workspaces and free memory, as a table and as JSON', async () => {
    await record();
    const { workspace } = await store.users.create({ email: 'ada@school.test' });
    await store.workspaces.writeStatus(workspace.id, {
      observedState: 'running',
      observedGeneration: workspace.spec.generation,
      statusMessage: '',
      editorEndpoint: '10.0.0.1:30001',
      node: 'n1',
    });
    const table = await cli(['nodes', 'list'], swarm());
    expect(table.code).toBe(EXIT.ok);
    const [head, first, second] = table.stdout.split('\n');
    expect(head).toMatch(/^NODE\s+STATE\s+AVAILABILITY\s+RUNNING\s+WORKSPACES\s+MEMORY FREE\s+SEEN$/);
    expect(first).toMatch(/^n1\s+ready\s+active\s+1\s+1\s+6\.0 GiB of 8\.0 GiB\s+\d{4}-/);
    expect(second).toMatch(/^n2\s+down\s+active\s+0\s+0\s+8\.0 GiB of 8\.0 GiB\s+/);
    const json = JSON.parse((await cli(['nodes', 'list', '--json'], swarm())).stdout) as { nodes: { name: string; freeMemoryBytes: number }[] };
    expect(json.nodes.map((node) => [node.name, node.freeMemoryBytes])).toEqual([
      ['n1', 6 * 1024 ** 3],
      ['n2', 8 * 1024 ** 3],
    ]);
  });

  it('says what to do when no node is recorded yet', async () => {
    const result = await cli(['nodes', 'list'], swarm());
    expect(result.stdout).toBe('No node recorded yet: the control plane records the nodes once it runs (its leader looks every few seconds).\n');
  });

  it('drains a recorded node (audited node.drain, announced), once, and takes it back (node.undrain)', async () => {
    await record();
    const server = await listening();
    try {
      const drained = await cli(['nodes', 'drain', 'n1'], swarm());
      expect(drained).toMatchObject({ code: EXIT.ok, stdout: `Node n1 is draining: its workspaces move to other nodes (see nodes list).${UNATTENDED}\n` });
      expect((await cli(['nodes', 'drain', 'n1'], swarm())).stdout).toBe('Node n1 was already draining.\n');
      await eventually('announced', async () => server.changes.some((change) => change.kind === 'nodes' && change.id === 'n1'));
      expect((await cli(['nodes', 'list'], swarm())).stdout.split('\n')[1]).toMatch(/^n1\s+ready\s+active \(drain asked \d{4}-[^)]+\)/);
      expect((await cli(['nodes', 'undrain', 'n1'], swarm())).code).toBe(EXIT.ok);
      const again = await cli(['nodes', 'undrain', 'n1'], swarm());
      expect(again).toMatchObject({ code: EXIT.refused, stderr: 'Error: Node n1 is not draining: nothing was changed.\n' });
      expect((await audit()).map((row) => [row.actor_email, row.action, row.target_id])).toEqual([
        ['cli', 'node.drain', 'n1'],
        ['cli', 'node.undrain', 'n1'],
      ]);
    } finally {
      await server.close();
    }
  });

  it('refuses to drain a node never recorded (exit 3, naming those there are) and on one Docker Engine (exit 2), changing nothing', async () => {
    await record();
    expect(await cli(['nodes', 'drain', 'n9'], swarm())).toMatchObject({ code: EXIT.notFound, stderr: 'Error: No node named n9 (the nodes: n1, n2).\n' });
    expect(await cli(['nodes', 'drain', 'n1'], env)).toMatchObject({
      code: EXIT.usage,
      stderr: 'Error: Draining is for workspaces on a swarm (RUNTIME=swarm): one Docker Engine has no nodes to drain.\n',
    });
    expect(await store.nodes.drains()).toEqual([]);
    expect(await audit()).toEqual([]);
  });
});

describe('audit list and audit-prune', () => {
  /** Entries `daysAgo` old, written as the store writes them. */
  async function seed(count: number, daysAgo: number, action = 'user.promote'): Promise<void> {
    await db.dataSource.query(
      `INSERT INTO audit_log (timestamp, actor_email, action, target_kind, target_id)
       SELECT now() - make_interval(days => $2) + i * interval '1 millisecond', 'coach@school.test', $3, 'user', 'u' || i FROM generate_series(1, $1) AS i`,
      [count, daysAgo, action],
    );
  }

  it('lists entries newest first with the API filters, and says how to get the next page', async () => {
    await seed(3, 10, 'allowlist.add');
    await seed(2, 1, 'user.promote');
    const page = JSON.parse((await cli(['audit', 'list', '--action', 'user.', '--json'], env)).stdout) as {
      entries: { id: number; action: string }[];
      nextCursor: number | null;
    };
    expect(page.entries.map((entry) => entry.action)).toEqual(['user.promote', 'user.promote']);
    const first = await cli(['audit', 'list', '--limit', '2'], env);
    expect(first.stdout.split('\n').at(-2)).toBe('More: --before 4');
    const older = JSON.parse(
      (await cli(['audit', 'list', '--before', '4', '--since', new Date(Date.now() - 11 * 86_400_000).toISOString(), '--json'], env)).stdout,
    ) as { entries: { id: number }[] };
    expect(older.entries.map((entry) => entry.id)).toEqual([3, 2, 1]);
  });

  it('refuses a date it cannot read (exit 2)', async () => {
    const result = await cli(['audit', 'list', '--since', 'last tuesday'], env);
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toMatch(/^Error: --since must be a date/);
  });

  it('previews with --dry-run: how many, the oldest and newest, nothing deleted', async () => {
    await seed(3, 400);
    await seed(2, 1);
    const before = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
    const result = await cli(['audit-prune', '--before', before, '--dry-run', '--json'], env);
    const preview = JSON.parse(result.stdout) as { count: number; oldest: string; newest: string; deleted: number; dryRun: boolean };
    expect(preview).toMatchObject({ count: 3, deleted: 0, dryRun: true });
    expect(Date.parse(preview.oldest)).toBeLessThan(Date.parse(preview.newest));
    expect((await audit()).length).toBe(5);
  });

  it(`deletes older entries in batches of ${PRUNE_BATCH} and audits the prune (audit.prune)`, async () => {
    await seed(PRUNE_BATCH * 2 + 7, 400);
    await seed(2, 1);
    const before = new Date(Date.now() - 30 * 86_400_000).toISOString();
    const result = await cli(['audit-prune', '--before', before, '--yes'], env);
    expect(result).toMatchObject({ code: EXIT.ok, stdout: `Deleted ${PRUNE_BATCH * 2 + 7} audit entries older than ${before}.\n` });
    const left = await audit();
    expect(left.map((row) => row.action)).toEqual(['user.promote', 'user.promote', 'audit.prune']);
    expect(left.at(-1)).toEqual({
      actor_id: null,
      actor_email: 'cli',
      action: 'audit.prune',
      target_id: 'audit_log',
      metadata: { before, deleted: PRUNE_BATCH * 2 + 7 },
    });
  });

  it('refuses a date in the future, and a prune without --yes where it cannot ask (exit 2, nothing deleted)', async () => {
    await seed(2, 400);
    expect((await cli(['audit-prune', '--before', '2999-01-01'], env)).stderr).toBe('Error: --before 2999-01-01 is in the future; give a past date.\n');
    const unasked = await cli(['audit-prune', '--before', '2026-01-01T00:00:00Z'], env);
    expect(unasked.code).toBe(EXIT.usage);
    expect(unasked.stderr).toMatch(/^Error: Delete 2 audit entries older than 2026-01-01T00:00:00.000Z .*Add --yes to confirm without a terminal\.\n$/);
    expect((await audit()).length).toBe(2);
  });
});

describe('the program', () => {
  it.each(Object.keys(COMMANDS))('documents %s in --help, with examples', async (id) => {
    const result = await cli([...id.split(':'), '--help'], env);
    expect(result.code).toBe(EXIT.ok);
    expect(result.stdout).toMatch(/USAGE/);
    expect(result.stdout).toMatch(/EXAMPLES\n\s+\$ cli /);
  });

  it('answers an unknown command or flag with exit 2 and one line', async () => {
    expect(await cli(['users', 'bogus'], env)).toEqual({
      code: EXIT.usage,
      stdout: '',
      stderr: 'Error: Unknown command "users bogus"; see --help for the commands.\n',
    });
    const flag = await cli(['users', 'list', '--bogus'], env);
    expect(flag).toMatchObject({ code: EXIT.usage, stdout: '' });
    expect(flag.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^Error: Nonexistent flag: --bogus/)]);
  });

  it('suggests the nearest command for a mistyped one', async () => {
    expect(await cli(['users', 'promot', 'ana@school.org'], env)).toEqual({
      code: EXIT.usage,
      stdout: '',
      stderr: 'Error: Unknown command "users promot ana@school.org"; see --help for the commands. Did you mean "users promote"?\n',
    });
    expect((await cli(['stauts'], env)).stderr).toBe('Error: Unknown command "stauts"; see --help for the commands. Did you mean "status"?\n');
  });

  it.each([
    [['audit', 'list', '--limit', '0'], 'Error: --limit takes a whole number from 1 to 500 (got "0").\n'],
    [['audit', 'list', '--limit', 'many'], 'Error: --limit takes a whole number from 1 to 500 (got "many").\n'],
    [['users', 'sign-in-link', 'ana@school.org', '--expires-in', '5000'], 'Error: --expires-in takes a whole number from 1 to 1440 (got "5000").\n'],
  ])('names the range a number flag takes: %j', async (argv, stderr) => {
    expect(await cli(argv, env)).toEqual({ code: EXIT.usage, stdout: '', stderr });
  });

  it('answers exit 5 at once, in one line, when the database cannot be reached', async () => {
    const started = Date.now();
    const result = await cli(['users', 'list'], { ...env, DATABASE_URL: 'postgres://postgres@127.0.0.1:9/nothing' });
    expect(result.code).toBe(EXIT.unavailable);
    expect(result.stderr).toMatch(/^Error: The database at postgres:\/\/postgres@127\.0\.0\.1:9\/nothing cannot be reached \(.*\)\.\n$/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('answers a bad configuration with exit 2, naming the variable', async () => {
    const result = await cli(['users', 'list'], { ...env, MAX_ACTIVE_CONTAINERS: 'many' });
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toMatch(/^Error: Invalid configuration: MAX_ACTIVE_CONTAINERS=/);
  });
});
