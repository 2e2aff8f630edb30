/**
 * Issue 43, item 5, join codes on the real app and real PostgreSQL: a coach opens, lists and closes
 * codes through the admin API (audited; bad hours and labels refused with the catalogue's error);
 * with JOIN_CODES=off every join endpoint answers 404 `join_codes_off` and /join says so; a student
 * joins on /join with the code (any case, with or without the dash) and a display name, is signed
 * in as a guest not on the allowlist and lands on their workspace page; a wrong code shows the form
 * again keeping the name; an expired or closed code says so, and its guests may no longer act;
 * wrong codes from one address lock it out after 10 (audited once), and tries from everyone are
 * bounded overall. Every JSON answer is checked against the OpenAPI document (test/helpers/contract.ts).
 */
import { JOIN_FAILURES_PER_ADDRESS, JOIN_LOCKOUT_SECONDS, JOIN_TRIES_PER_MINUTE } from '../../src/store/join-codes.ts';
import type { ErrorBody, JoinCode, JoinCodeAnswer, JoinCodeList, StudentWorkspaceAnswer } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let off: TestApp;
let coach: Student;

beforeAll(async () => {
  // No one is on the allowlist: guests are admitted all the same.
  app = await startApp(db.dataSource, { JOIN_CODES: 'on' }, { allowlist: { isAllowed: () => false } });
  off = await startApp(db.dataSource);
});
beforeEach(async () => {
  coach = await newStudent(app.store, 'coach', tag, 'admin');
});
afterAll(async () => {
  await app?.close();
  await off?.close();
});

/** An admin call as the coach (a session cookie; the same origin for a change). */
async function admin(method: 'GET' | 'POST', path: string, body?: unknown, on: TestApp = app): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { cookie: coach.cookie, accept: 'application/json' };
  if (method === 'POST') headers.origin = on.url;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${on.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, body: await response.json() };
}
const openCode = async (body: unknown = { hours: 2 }) => {
  const answer = await admin('POST', '/admin/join-codes', body);
  expect(answer.status).toBe(201);
  return (answer.body as JoinCodeAnswer).code;
};
const errorOf = (answer: { body: unknown }) => (answer.body as ErrorBody).error;

/** Posts the /join form as a browser on this origin would; the answer unread, not followed. */
const join = (fields: { code: string; name: string }, on: TestApp = app, headers: Record<string, string> = { origin: on.url }) =>
  fetch(`${on.url}/join`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
  });
/** The session cookie a response set. */
const cookieOf = (response: Response) =>
  response.headers
    .getSetCookie()
    .map((cookie) => cookie.split(';')[0]!)
    .join('; ');
const audited = async (action: string) =>
  (await db.dataSource.query('SELECT actor_email, target_kind, target_id, metadata FROM audit_log WHERE action = $1 ORDER BY id', [action])) as {
    actor_email: string;
    target_kind: string;
    target_id: string;
    metadata: Record<string, unknown>;
  }[];

describe('with JOIN_CODES=off (the default)', () => {
  it('answers every join endpoint 404 join_codes_off, and /join says join codes are off', async () => {
    for (const [method, path, body] of [
      ['GET', '/admin/join-codes', undefined],
      ['POST', '/admin/join-codes', { hours: 2 }],
      ['POST', '/admin/join-codes/00000000-0000-4000-8000-000000000001/close', undefined],
    ] as const) {
      const answer = await admin(method, path, body, off);
      expect({ path, status: answer.status, code: errorOf(answer).code }).toEqual({ path, status: 404, code: 'join_codes_off' });
    }
    expect((await admin('GET', '/admin/config/join-codes', undefined, off)).body).toEqual({ enabled: false });
    expect((await admin('GET', '/admin/config/join-codes')).body).toEqual({ enabled: true });
    const page = await fetch(`${off.url}/join`);
    expect(page.status).toBe(404);
    expect(await page.text()).toContain('Join codes are off on this server');
    const posted = await join({ code: 'ABCD-EFGH', name: 'Ada' }, off);
    expect(posted.status).toBe(404);
    expect(await posted.text()).toContain('Join codes are off');
  });
});

describe('a coach', () => {
  it('opens codes (several at once), lists them with their guests, and closes one early: each audited, a second close changing nothing', async () => {
    const before = Date.now();
    const outreach = await openCode({ hours: 3, label: '  Outreach day ' });
    expect(outreach).toMatchObject({ label: 'Outreach day', state: 'open', joined: 0, guests: [], closedAt: null, handledAt: null, backups: [] });
    expect(outreach.code).toMatch(/^[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{4}-[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{4}$/);
    expect(Date.parse(outreach.expiresAt) - before).toBeGreaterThanOrEqual(3 * 3_600_000 - 5000);
    expect(Date.parse(outreach.expiresAt) - before).toBeLessThan(3 * 3_600_000 + 5000);
    const second = await openCode({ hours: 1 });
    expect(second.code).not.toBe(outreach.code);

    const listed = (await admin('GET', '/admin/join-codes')).body as JoinCodeList;
    expect(listed.codes.map((code) => [code.code, code.state])).toEqual([
      [second.code, 'open'],
      [outreach.code, 'open'],
    ]);

    const closed = await admin('POST', `/admin/join-codes/${outreach.id}/close`);
    expect(closed.status).toBe(200);
    expect((closed.body as JoinCodeAnswer).code).toMatchObject({ state: 'closed', closedBy: coach.email });
    const again = await admin('POST', `/admin/join-codes/${outreach.id}/close`);
    expect((again.body as JoinCodeAnswer).code.closedAt).toBe((closed.body as JoinCodeAnswer).code.closedAt);

    expect((await audited('join_code.open')).map((entry) => [entry.actor_email, entry.target_id, entry.metadata])).toEqual([
      [coach.email, outreach.id, { code: outreach.code, label: 'Outreach day', hours: 3 }],
      [coach.email, second.id, { code: second.code, label: '', hours: 1 }],
    ]);
    expect((await audited('join_code.close')).map((entry) => [entry.target_id, entry.metadata])).toEqual([
      [outreach.id, { code: outreach.code, label: 'Outreach day', guests: 0 }],
    ]);
  });

  it('is refused hours outside 1 to 12 whole hours, a long or invisible-character label, and an unknown code, each with a clear error', async () => {
    for (const body of [{ hours: 0 }, { hours: 13 }, { hours: 1.5 }, { hours: '2' }, {}, { hours: 2, extra: true }, { hours: 2, label: 'x'.repeat(61) }]) {
      const answer = await admin('POST', '/admin/join-codes', body);
      expect({ body, status: answer.status, code: errorOf(answer).code }).toEqual({ body, status: 400, code: 'validation_error' });
    }
    const hidden = await admin('POST', '/admin/join-codes', { hours: 2, label: 'Out\u0007reach' });
    expect(hidden.status).toBe(400);
    expect(errorOf(hidden)).toEqual({ code: 'validation_error', message: 'label: A label cannot hold control or invisible characters.' });
    const unknown = await admin('POST', '/admin/join-codes/00000000-0000-4000-8000-000000000001/close');
    expect([unknown.status, errorOf(unknown).code]).toEqual([404, 'join_code_not_found']);
    const notAnId = await admin('POST', '/admin/join-codes/nope/close');
    expect([notAnId.status, errorOf(notAnId).code]).toEqual([404, 'join_code_not_found']);
    expect(await audited('join_code.open')).toEqual([]);
  });
});

describe('a student on /join', () => {
  it('shows the form', async () => {
    const page = await fetch(`${app.url}/join`);
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain('<form method="post" action="/join">');
    expect(text).toContain('name="code"');
    expect(text).toContain('name="name"');
  });

  it('joins with a code typed in lower case without the dash: a guest not on the allowlist, signed in, lands on their workspace page', async () => {
    const code = await openCode({ hours: 2, label: 'Outreach day' });
    const answer = await join({ code: code.code.replace('-', '').toLowerCase(), name: '  Ada Lovelace ' });
    expect(answer.status).toBe(303);
    const where = answer.headers.get('location')!;
    expect(where).toMatch(/^\/u\/guest-[0-9a-f]{8}\/$/);
    const cookie = cookieOf(answer);

    const me = await fetch(`${app.url}/auth/me`, { headers: { cookie } });
    const user = ((await me.json()) as { user: { name: string; email: string; role: string; workspaceSlug: string } }).user;
    expect(user).toMatchObject({ name: 'Ada Lovelace', role: 'user', workspaceSlug: where.split('/')[2] });
    expect(user.email).toMatch(/^guest-[0-9a-f]{8}@join\.invalid$/);

    const page = await fetch(`${app.url}${where}`, { headers: { cookie, accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(`<h1>Workspace ${user.workspaceSlug}</h1>`);
    const status = await fetch(`${app.url}${where}api/workspace`, { headers: { cookie, accept: 'application/json' } });
    expect(status.status).toBe(200);
    // Their workspace ends with the code: when, for their page to say.
    expect(((await status.json()) as StudentWorkspaceAnswer).workspace.guest).toEqual({ endsAt: new Date(code.expiresAt).toISOString() });

    const listed = ((await admin('GET', '/admin/join-codes')).body as JoinCodeList).codes[0]!;
    expect(listed).toMatchObject({ joined: 1, guests: [{ name: 'Ada Lovelace', workspaceSlug: user.workspaceSlug }] });
    const [entry] = await audited('join_code.join');
    expect(entry).toMatchObject({
      actor_email: user.email,
      target_kind: 'join-code',
      target_id: code.id,
      metadata: { code: code.code, name: 'Ada Lovelace', workspaceSlug: user.workspaceSlug },
    });
  });

  it('shows the form again for a wrong code, with one clear message, keeping the name typed; a bad name is said without counting', async () => {
    await openCode();
    const wrong = await join({ code: 'ZZZZ-ZZZZ', name: 'Grace <Hopper>' });
    expect(wrong.status).toBe(400);
    const text = await wrong.text();
    expect(text).toContain('That join code is not right. Check it on the board and type it again.');
    expect(text).toContain('value="Grace &#60;Hopper&#62;"');
    expect(text.match(/class="error"/g)).toHaveLength(1);
    const code = await openCode();
    const unnamed = await join({ code: code.code, name: '   ' });
    expect(unnamed.status).toBe(400);
    expect(await unnamed.text()).toContain('Enter a display name.');
    const long = await join({ code: code.code, name: 'x'.repeat(61) });
    expect(await long.text()).toContain('A display name has at most 60 characters.');
    const control = await join({ code: code.code, name: 'Ada\u0000' });
    expect(await control.text()).toContain('A display name cannot hold control or invisible characters.');
    // Only the wrong code counted against the address.
    expect(await db.dataSource.query("SELECT points FROM rate_limits WHERE key LIKE 'join_failures:%'")).toEqual([{ points: 1 }]);
  });

  it("says an expired or closed code has expired, and a closed code's guests may no longer act", async () => {
    const code = await openCode();
    const joined = await join({ code: code.code, name: 'Bob' });
    const cookie = cookieOf(joined);
    const where = joined.headers.get('location')!;
    expect((await fetch(`${app.url}${where}api/workspace`, { headers: { cookie, accept: 'application/json' } })).status).toBe(200);

    await admin('POST', `/admin/join-codes/${code.id}/close`);
    const closed = await join({ code: code.code, name: 'Cy' });
    expect(closed.status).toBe(410);
    expect(await closed.text()).toContain('This join code has expired. Ask your coach for a new one.');
    expect((await fetch(`${app.url}${where}api/workspace`, { headers: { cookie, accept: 'application/json' } })).status).toBe(401);

    const hours = await openCode();
    await db.dataSource.query("UPDATE join_codes SET expires_at = now() - interval '1 second' WHERE id = $1", [hours.id]);
    const expired = await join({ code: hours.code, name: 'Cy' });
    expect(expired.status).toBe(410);
    expect(await expired.text()).toContain('This join code has expired. Ask your coach for a new one.');
    expect(((await admin('GET', '/admin/join-codes')).body as JoinCodeList).codes.find((each: JoinCode) => each.id === hours.id)?.state).toBe('expired');
  });

  it('refuses a form from another site', async () => {
    const code = await openCode();
    const answer = await join({ code: code.code, name: 'Eve' }, app, { origin: 'http://evil.localhost', 'sec-fetch-site': 'cross-site' });
    expect(answer.status).toBe(403);
    expect(await answer.text()).toContain('This request came from another site and was refused.');
  });

  it(`locks an address out after ${JOIN_FAILURES_PER_ADDRESS} wrong codes, saying when to try again, right code or not; audited once`, async () => {
    const code = await openCode();
    for (let attempt = 1; attempt < JOIN_FAILURES_PER_ADDRESS; attempt++) expect((await join({ code: 'ZZZZ-ZZZZ', name: 'Mallory' })).status).toBe(400);
    const locking = await join({ code: 'ZZZZ-ZZZZ', name: 'Mallory' });
    expect(locking.status).toBe(429);
    expect(Number(locking.headers.get('retry-after'))).toBe(JOIN_LOCKOUT_SECONDS);
    expect(await locking.text()).toContain(`Too many wrong join codes were typed on this network. Try again in ${JOIN_LOCKOUT_SECONDS / 60} minutes.`);
    for (const typed of ['ZZZZ-ZZZZ', code.code]) {
      const later = await join({ code: typed, name: 'Mallory' });
      expect(later.status).toBe(429);
      expect(Number(later.headers.get('retry-after'))).toBeGreaterThan(JOIN_LOCKOUT_SECONDS - 60);
    }
    const entries = await audited('join_code.refused');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ target_kind: 'address', metadata: { failures: JOIN_FAILURES_PER_ADDRESS, last: 'join_code_wrong' } });
    expect(((await admin('GET', '/admin/join-codes')).body as JoinCodeList).codes[0]!.joined).toBe(0);
  });

  it(`takes at most ${JOIN_TRIES_PER_MINUTE} tries a minute from all addresses together`, async () => {
    for (let attempt = 0; attempt < JOIN_TRIES_PER_MINUTE; attempt++) {
      await expect(
        app.store.joinCodes.join({ code: 'ZZZZ-ZZZZ', name: 'Ada', address: `10.1.${Math.floor(attempt / 250)}.${attempt % 250}` }),
      ).rejects.toMatchObject({
        code: 'join_code_wrong',
      });
    }
    await expect(app.store.joinCodes.join({ code: 'ZZZZ-ZZZZ', name: 'Ada', address: '10.2.0.1' })).rejects.toMatchObject({ code: 'joins_busy', status: 503 });
  });
});
