/**
 * Issue 14 (security review), the proxy in path mode against real editors (the test image's echo
 * editor in Docker, real PostgreSQL, the real allowlist watcher): an open WebSocket ends within a
 * second of every revocation, only the owner opens an editor (an admin gets 403, a page in a
 * browser, and still manages it through the student API), another student gets a page too, and a
 * client's Forwarded and X-Real-IP never reach the editor.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { AllowlistWatcher } from '../../controllers/allowlist-watcher.ts';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { categoryLogger } from '../../src/log.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { captureLogger, createHarness, eventually, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { closesWithin, echoes } from '../helpers/websocket.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let dir: string;
let file: AllowlistFile;
let watcher: AllowlistWatcher;
let app: TestApp;
let harness: Harness;
/** Owners of running workspaces, one per kind of revocation, and Ada, whose tunnels must outlive all of them. */
let ada: Student;
let coach: Student;
let dana: Student;
let eve: Student;
let fay: Student;
let gus: Student;
let hal: Student;
/** An admin who owns no running workspace. */
let head: Student;

/** Writes the allowlist: every student's email but `except`'s. */
const allowAllBut = (...except: Student[]) =>
  writeFile(
    file.path,
    JSON.stringify({ entries: [ada, coach, dana, eve, fay, gus, hal, head].filter((who) => !except.includes(who)).map((who) => who.email) }),
  );

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'cp-security-tunnels-'));
  file = new AllowlistFile(path.join(dir, 'allowlist.json'));
  watcher = new AllowlistWatcher({ file, log: categoryLogger(captureLogger().root, 'auth'), implicit: [] });
  await watcher.start();
  app = await startApp(db.dataSource, {}, { allowlist: watcher, allowlistFile: file });
  // A change feed of its own: the revocations below go through the app's store, so the controller
  // does not hear them, and an editor stays up unless the proxy itself ends its tunnels.
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  [ada, coach, dana, eve, fay, gus, hal, head] = await Promise.all([
    newStudent(harness.store, 'ada', tag),
    newStudent(harness.store, 'coach', tag, 'admin'),
    newStudent(harness.store, 'dana', tag),
    newStudent(harness.store, 'eve', tag),
    newStudent(harness.store, 'fay', tag),
    newStudent(harness.store, 'gus', tag),
    newStudent(harness.store, 'hal', tag),
    newStudent(harness.store, 'head', tag, 'admin'),
  ]);
  await allowAllBut();
  await eventually('allowlist loaded', async () => watcher.isAllowed(head.email), 5000);
  await Promise.all(
    [ada, coach, dana, eve, fay, gus, hal].map(async (student) => {
      student.workspace = await openAndWait(harness.store, student.workspace);
    }),
  );
}, 90_000);
afterAll(async () => {
  await app?.close();
  await harness?.stop();
  await watcher?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
  await rm(dir, { recursive: true, force: true });
});

const url = (owner: Student, rest: string) => `${app.url}/u/${owner.workspace.slug}${rest}`;

/** Opens a WebSocket to `owner`'s editor with `as`'s session; resolves once it echoes. */
async function tunnel(owner: Student, as: Student = owner): Promise<WebSocket> {
  const socket = new WebSocket(url(owner, '/ws').replace('http', 'ws'), { headers: { cookie: as.cookie, origin: app.url } });
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, answer) => reject(new Error(`upgrade refused with ${answer.statusCode}`)));
  });
  await echoes(socket);
  return socket;
}

/**
 * What a WebSocket upgrade to `owner`'s editor gets with `as`'s session: the refusal's status; 101
 * when the tunnel opens and echoes; or, for a socket opened only to be closed (a stopped workspace,
 * see tryAgainLater in api/responses.ts), `closed <code>: <reason>`.
 */
function upgradeStatus(owner: Student, as: Student): Promise<number | string> {
  const socket = new WebSocket(url(owner, '/ws').replace('http', 'ws'), { headers: { cookie: as.cookie, origin: app.url } });
  return new Promise((resolve) => {
    socket.once('open', () => socket.send('anyone there?'));
    socket.once('message', () => {
      socket.close();
      resolve(101);
    });
    socket.once('close', (code, reason) => resolve(`closed ${code}: ${reason.toString()}`));
    socket.once('unexpected-response', (_request, answer) => resolve(answer.statusCode ?? 0));
  });
}

describe('an open WebSocket ends within a second of a revocation', () => {
  /** Runs `revoke` against `victim`'s open tunnel, with one of Ada's open besides, which must stay. */
  async function revokedWithin(victim: Student, revoke: () => Promise<unknown>): Promise<void> {
    const bystander = await tunnel(ada);
    const socket = await tunnel(victim);
    await revoke();
    expect(await closesWithin(socket, 1000)).toBe(true);
    await echoes(bystander);
    bystander.close();
  }

  it('but not when its user, an admin, is demoted: their own editor stays open and they stay signed in', async () => {
    const socket = await tunnel(coach);
    await app.store.users.demote(SYSTEM_ACTOR, coach.userId);
    // The proxy checks the demoted user's tunnels again (a change of the user), within the second a revocation takes.
    expect(await closesWithin(socket, 1000)).toBe(false);
    await echoes(socket);
    socket.close();
    expect(await upgradeStatus(coach, coach)).toBe(101);
  });

  it('when its user is deleted', async () => {
    await revokedWithin(dana, () => app.store.users.delete(SYSTEM_ACTOR, dana.userId));
    expect(await upgradeStatus(dana, dana)).toBe(401);
  });

  it('when its user is taken off the allowlist', async () => {
    await revokedWithin(eve, async () => {
      await allowAllBut(eve);
      await eventually('the allowlist reloaded', async () => !watcher.isAllowed(eve.email), 5000);
    });
    expect(await upgradeStatus(eve, eve)).toBe(401);
  });

  it('when its workspace is stopped', async () => {
    await revokedWithin(fay, () => app.store.workspaces.stop(SYSTEM_ACTOR, fay.workspace.id, 'coach'));
    // Opened and closed at once with Try Again Later: VS Code retries that quietly (a refusal is a permanent failure to it).
    expect(await upgradeStatus(fay, fay)).toBe(`closed 1013: Workspace ${fay.workspace.slug} is not running.`);
  });

  it('when its workspace is deleted', async () => {
    await revokedWithin(gus, async () => {
      await db.dataSource.query("UPDATE workspaces SET desired_state = 'deleted' WHERE id = $1", [gus.workspace.id]);
      app.store.changes.publish({ kind: 'workspaces', id: gus.workspace.id });
    });
    expect(await upgradeStatus(gus, gus)).toBe(403);
  });

  it('when its workspace is no longer its user’s', async () => {
    await revokedWithin(hal, async () => {
      const [other] = (await db.dataSource.query("INSERT INTO users (email, name) VALUES ($1, '') RETURNING id", [`other-${tag}@school.test`])) as {
        id: string;
      }[];
      await db.dataSource.query('UPDATE workspaces SET user_id = $2 WHERE id = $1', [hal.workspace.id, other!.id]);
      app.store.changes.publish({ kind: 'workspaces', id: hal.workspace.id });
    });
    expect(await upgradeStatus(hal, hal)).toBe(403);
  });
});

describe('path mode: only the owner opens an editor', () => {
  it('refuses an admin who is not the owner: JSON for an API client, a page for a browser, 403 for a WebSocket', async () => {
    const api = await fetch(url(ada, '/echo-headers'), { headers: { cookie: head.cookie } });
    expect(api.status).toBe(403);
    const error = ((await api.json()) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('forbidden');
    expect(error.message).toContain('ask the student');
    const page = await fetch(url(ada, '/'), { headers: { cookie: head.cookie, accept: 'text/html' } });
    expect(page.status).toBe(403);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('ask the student');
    expect(html).not.toContain('editor stand-in');
    expect(await upgradeStatus(ada, head)).toBe(403);
    // The owner still gets the editor, and the admin the student API, where no student code runs.
    expect((await fetch(url(ada, '/'), { headers: { cookie: ada.cookie, accept: 'text/html' } })).status).toBe(200);
    const studentApi = await fetch(url(ada, '/api/workspace'), { headers: { cookie: head.cookie } });
    expect(studentApi.status).toBe(200);
    expect(((await studentApi.json()) as { workspace: { slug: string } }).workspace.slug).toBe(ada.workspace.slug);
  });

  it("shows another student a page, not raw JSON, when their browser asks for someone else's workspace", async () => {
    const page = await fetch(url(ada, '/'), { headers: { cookie: fay.cookie, accept: 'text/html,application/xhtml+xml' } });
    expect(page.status).toBe(403);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toContain('This workspace is not yours.');
  });
});

describe('what a client cannot tell the editor', () => {
  it('drops Forwarded and X-Real-IP, as it replaces X-Forwarded-*', async () => {
    const response = await fetch(url(ada, '/echo-headers'), {
      headers: { cookie: ada.cookie, forwarded: 'for=203.0.113.9;host=evil.example', 'x-real-ip': '203.0.113.9', 'x-forwarded-port': '1' },
    });
    expect(response.status).toBe(200);
    const { headers } = (await response.json()) as { headers: Record<string, string> };
    expect(headers.forwarded).toBeUndefined();
    expect(headers['x-real-ip']).toBeUndefined();
    expect(headers['x-forwarded-port']).toBeUndefined();
    expect(headers['x-forwarded-for']).toBe('127.0.0.1');
  });
});
