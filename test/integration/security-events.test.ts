/**
 * Issue 18: the admin panel's event stream (`GET /admin/events`, capacity refusals with students'
 * emails and slugs, every change) ends as soon as the admin who opened it may no longer read it:
 * demoted, deleted or signed out, as the same cookie gets 401 or 403 everywhere else. Another
 * admin's stream, and the ADMIN_TOKEN's, stay open and keep hearing changes. Real app, real
 * PostgreSQL.
 */
import http from 'node:http';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const ADMIN_TOKEN = 'admin-token-events-0123456789abcdef012345';
const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let coach: Student;
let head: Student;
let ada: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource, { ADMIN_TOKEN });
});
beforeEach(async () => {
  // Two admins: one can be demoted (the last admin cannot).
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  head = await newStudent(app.store, 'head', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
});
afterAll(async () => app.close());

/** An open event stream: what it has received so far, and a promise of its end. */
interface Stream {
  text: () => string;
  ended: Promise<void>;
  close: () => void;
}

/** Opens `/admin/events` with `headers`; resolves once the stream's first comment arrived. */
function openEvents(headers: Record<string, string>): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(app.url);
    const request = http.get({ host: '127.0.0.1', port, path: '/admin/events', headers }, (response) => {
      if (response.statusCode !== 200) return reject(new Error(`status ${response.statusCode}`));
      let text = '';
      const ended = new Promise<void>((done) => response.once('close', done));
      response.on('data', (chunk: Buffer) => {
        const first = text === '';
        text += chunk.toString();
        if (first) resolve({ text: () => text, ended, close: () => request.destroy() });
      });
    });
    request.on('error', reject);
  });
}

/** Resolves when `stream` has received a change naming `id` (a stream that ended never does). */
const hears = (stream: Stream, id: string) => eventually(`a change of ${id}`, async () => stream.text().includes(`"id":"${id}"`));

it.each([
  ['demoted', () => app.store.users.demote(SYSTEM_ACTOR, coach.userId)],
  ['deleted', () => app.store.users.delete(SYSTEM_ACTOR, coach.userId)],
  [
    'signed out',
    () =>
      fetch(`${app.url}/auth/sign-out`, { method: 'POST', headers: { cookie: coach.cookie, origin: app.url }, redirect: 'manual' }).then((answer) =>
        expect(answer.status).toBe(303),
      ),
  ],
])("ends an admin's stream once they are %s; another admin's and the token's go on", async (_what, revoke) => {
  const [mine, other, token] = await Promise.all([
    openEvents({ cookie: coach.cookie }),
    openEvents({ cookie: head.cookie }),
    openEvents({ authorization: `Bearer ${ADMIN_TOKEN}` }),
  ]);
  try {
    let ended = false;
    void mine.ended.then(() => (ended = true));
    await revoke();
    await mine.ended;
    expect(ended).toBe(true);
    // The others still hear what changes next: had the same check ended them, it would have done so
    // before the stream above ended, and they would hear nothing more.
    await app.store.workspaces.open(ada.workspace.id);
    await Promise.all([hears(other, ada.workspace.id), hears(token, ada.workspace.id)]);
    // And the same cookie is refused everywhere now.
    expect((await fetch(`${app.url}/admin/events`, { headers: { cookie: coach.cookie } })).status).toBeGreaterThanOrEqual(401);
  } finally {
    for (const stream of [mine, other, token]) stream.close();
  }
});
