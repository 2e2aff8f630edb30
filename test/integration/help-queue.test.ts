/**
 * Issue 43, the help queue's server side, on the real app and real PostgreSQL: a student raises a
 * hand (with a message), sees their place and the coach coming, and takes it back; a coach lists
 * the queue, takes a request (the first coach wins) and resolves it; each change is audited
 * (`help.request`, `help.take`, `help.resolve`; a withdrawal is not) and heard on an admin's live
 * event stream; raises are limited per workspace; bad input is a clear error. Every JSON answer is
 * checked against the OpenAPI document (test/helpers/contract.ts).
 */
import http from 'node:http';
import { HELP_MESSAGE_MAX, HELP_RAISES_PER_WINDOW } from '../../src/store/help.ts';
import type { ErrorBody, HelpQueue, HelpRequestAnswer, StudentHelpAnswer, StudentHelpStatus } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let ada: Student;
let bob: Student;
let cy: Student;
let grace: Student;
let alan: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource);
});
beforeEach(async () => {
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  cy = await newStudent(app.store, 'cy', tag);
  grace = await newStudent(app.store, 'grace', tag, 'admin');
  alan = await newStudent(app.store, 'alan', tag, 'admin');
});
afterAll(async () => app?.close());

/** A call as `as` (a session cookie; the same origin for a change), with a JSON body when given. */
async function call(as: Student, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; headers: Headers; body: unknown }> {
  const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
  if (method === 'POST') headers.origin = app.url;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${app.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

const helpOf = (student: Student) => `/u/${student.workspace.slug}/api/help`;
const raise = (student: Student, message?: unknown) => call(student, 'POST', helpOf(student), message === undefined ? {} : { message });
const mine = async (student: Student) => ((await call(student, 'GET', helpOf(student))).body as StudentHelpStatus).help;
const withdraw = (student: Student, slugOf: Student = student) => call(student, 'POST', `${helpOf(slugOf)}/withdraw`);
const take = (coach: Student, id: string) => call(coach, 'POST', `/admin/help/${id}/take`);
const resolve = (coach: Student, id: string) => call(coach, 'POST', `/admin/help/${id}/resolve`);
const queue = async (coach: Student) => ((await call(coach, 'GET', '/admin/help')).body as HelpQueue).requests;
const raised = async (student: Student, message?: string) => {
  const answer = await raise(student, message);
  expect(answer.status).toBe(201);
  return (answer.body as StudentHelpAnswer).help;
};
const errorOf = (answer: { body: unknown }) => (answer.body as ErrorBody).error;

/** The audit entries of the help queue, oldest first. */
async function helpAudit(): Promise<{ action: string; actor: string; target: string; metadata: Record<string, unknown> }[]> {
  const rows: { action: string; actor_email: string; target_kind: string; target_id: string; metadata: Record<string, unknown> }[] = await db.dataSource.query(
    "SELECT action, actor_email, target_kind, target_id, metadata FROM audit_log WHERE action LIKE 'help.%' ORDER BY id",
  );
  return rows.map((row) => ({ action: row.action, actor: row.actor_email, target: `${row.target_kind}:${row.target_id}`, metadata: row.metadata }));
}

describe('a student raising a hand', () => {
  it('raises a request with a message (trimmed), sees it waiting at place 1, and the raise is audited `help.request`', async () => {
    const help = await raised(ada, '  My robot does not drive  \n');
    expect(help).toEqual({
      id: expect.any(String),
      state: 'waiting',
      message: 'My robot does not drive',
      createdAt: expect.any(String),
      place: 1,
      takenBy: null,
      takenAt: null,
    });
    expect(await mine(ada)).toEqual(help);
    expect(await mine(bob)).toBeNull();
    expect(await helpAudit()).toEqual([
      { action: 'help.request', actor: ada.email, target: `help_request:${help.id}`, metadata: { workspaceId: ada.workspace.id, slug: ada.workspace.slug } },
    ]);
  });

  it('keeps no message when none or only blanks are given', async () => {
    expect((await raised(ada)).message).toBeNull();
    expect((await raised(bob, '   ')).message).toBeNull();
  });

  it('refuses a second raise while one is open with 409 `help_request_open`, waiting or taken', async () => {
    const first = await raised(ada, 'first');
    const again = await raise(ada, 'second');
    expect(again.status).toBe(409);
    expect(errorOf(again)).toEqual({ code: 'help_request_open', message: expect.stringContaining('open already') });
    expect((await take(grace, first.id)).status).toBe(200);
    expect(errorOf(await raise(ada)).code).toBe('help_request_open');
    expect(await mine(ada)).toMatchObject({ id: first.id, message: 'first', state: 'taken' });
    expect((await helpAudit()).filter((entry) => entry.action === 'help.request')).toHaveLength(1);
  });

  it('keeps one of two raises of a workspace sent at once, and tells the other 409 `help_request_open`', async () => {
    const answers = await Promise.all([raise(ada, 'one'), raise(ada, 'two')]);
    expect(answers.map((answer) => answer.status).toSorted((a, b) => a - b)).toEqual([201, 409]);
    expect((await helpAudit()).filter((entry) => entry.action === 'help.request')).toHaveLength(1);
  });

  it('tells each student their place among the waiting, oldest first, and moves it when the one ahead is taken or withdrawn', async () => {
    const first = await raised(ada);
    const second = await raised(bob);
    const third = await raised(cy);
    expect([first.place, second.place, third.place]).toEqual([1, 2, 3]);

    expect((await take(grace, first.id)).status).toBe(200);
    expect(await mine(ada)).toMatchObject({ state: 'taken', place: null, takenBy: { name: '', email: grace.email }, takenAt: expect.any(String) });
    expect((await mine(bob))!.place).toBe(1);
    expect((await mine(cy))!.place).toBe(2);

    expect((await withdraw(bob)).status).toBe(200);
    expect((await mine(cy))!.place).toBe(1);
  });
});

describe('a student withdrawing', () => {
  it('takes the open request back (not audited), may raise again, and a withdrawal with none open is 404 `help_request_not_found`', async () => {
    const help = await raised(ada, 'never mind');
    const withdrawn = await withdraw(ada);
    expect(withdrawn.status).toBe(200);
    expect((withdrawn.body as StudentHelpAnswer).help).toMatchObject({ id: help.id, state: 'withdrawn', place: null });
    expect(await mine(ada)).toBeNull();
    expect(await queue(grace)).toEqual([]);
    expect((await helpAudit()).map((entry) => entry.action)).toEqual(['help.request']);

    const none = await withdraw(ada);
    expect(none.status).toBe(404);
    expect(errorOf(none).code).toBe('help_request_not_found');
    expect((await raised(ada)).place).toBe(1);
  });

  it("refuses a student's withdrawal of another student's request (403), which stays waiting", async () => {
    const help = await raised(ada);
    const refused = await withdraw(bob, ada);
    expect(refused.status).toBe(403);
    expect(errorOf(refused).code).toBe('forbidden');
    expect(await mine(ada)).toMatchObject({ id: help.id, state: 'waiting' });
  });
});

describe("a coach's queue", () => {
  it('lists waiting and taken requests oldest first, with the student, the workspace, the age and the coach; not resolved or withdrawn ones', async () => {
    const first = await raised(ada, 'drive');
    const second = await raised(bob, 'build');
    const third = await raised(cy, 'gone');
    await take(alan, second.id);
    await withdraw(cy);
    const listed = await queue(grace);
    expect(listed).toEqual([
      {
        ...first,
        ageSeconds: expect.any(Number),
        student: { id: ada.userId, name: '', email: ada.email },
        workspace: { id: ada.workspace.id, slug: ada.workspace.slug },
        endedBy: null,
        endedAt: null,
      },
      expect.objectContaining({
        id: second.id,
        state: 'taken',
        place: null,
        message: 'build',
        takenBy: { name: '', email: alan.email },
        student: { id: bob.userId, name: '', email: bob.email },
        workspace: { id: bob.workspace.id, slug: bob.workspace.slug },
      }),
    ]);
    expect(listed[0]!.ageSeconds).toBeGreaterThanOrEqual(0);
    expect(listed.map((request) => request.id)).not.toContain(third.id);
    await resolve(grace, first.id);
    expect((await queue(grace)).map((request) => request.id)).toEqual([second.id]);
  });

  it('is for coaches: a student gets 403', async () => {
    const listed = await call(ada, 'GET', '/admin/help');
    expect(listed.status).toBe(403);
  });
});

describe('a coach taking a request', () => {
  it('takes it ("coming", audit `help.take`); the same coach again changes nothing; a second coach gets 409 `help_request_taken` naming the first', async () => {
    const help = await raised(ada);
    const taken = await take(grace, help.id);
    expect(taken.status).toBe(200);
    expect((taken.body as HelpRequestAnswer).request).toMatchObject({
      id: help.id,
      state: 'taken',
      takenBy: { email: grace.email },
      takenAt: expect.any(String),
    });

    expect((await take(grace, help.id)).status).toBe(200);
    const second = await take(alan, help.id);
    expect(second.status).toBe(409);
    expect(errorOf(second)).toEqual({ code: 'help_request_taken', message: `${grace.email} is on the way already.` });
    expect(await mine(ada)).toMatchObject({ state: 'taken', takenBy: { email: grace.email } });

    expect(await helpAudit()).toEqual([
      expect.objectContaining({ action: 'help.request' }),
      {
        action: 'help.take',
        actor: grace.email,
        target: `help_request:${help.id}`,
        metadata: { workspaceId: ada.workspace.id, slug: ada.workspace.slug, student: ada.email },
      },
    ]);
  });

  it('lets exactly one of two coaches taking at once win', async () => {
    const help = await raised(ada);
    const answers = await Promise.all([take(grace, help.id), take(alan, help.id)]);
    expect(answers.map((answer) => answer.status).toSorted((a, b) => a - b)).toEqual([200, 409]);
    expect((await helpAudit()).filter((entry) => entry.action === 'help.take')).toHaveLength(1);
  });

  it('names the coach by name when their account has one', async () => {
    await db.dataSource.query("UPDATE users SET name = 'Grace Hopper' WHERE id = $1", [grace.userId]);
    const help = await raised(ada);
    await take(grace, help.id);
    expect(errorOf(await take(alan, help.id)).message).toBe(`Grace Hopper (${grace.email}) is on the way already.`);
    expect((await mine(ada))!.takenBy).toEqual({ name: 'Grace Hopper', email: grace.email });
  });
});

describe('a coach resolving a request', () => {
  it("resolves one another coach took (audit `help.resolve`), then it is closed: 409 `help_request_closed` to resolve or take again; the student's request is gone", async () => {
    const help = await raised(ada);
    await take(grace, help.id);
    const resolved = await resolve(alan, help.id);
    expect(resolved.status).toBe(200);
    expect((resolved.body as HelpRequestAnswer).request).toMatchObject({ id: help.id, state: 'resolved', endedBy: alan.email, endedAt: expect.any(String) });
    expect(await mine(ada)).toBeNull();

    for (const again of [await resolve(grace, help.id), await take(alan, help.id)]) {
      expect(again.status).toBe(409);
      expect(errorOf(again)).toEqual({ code: 'help_request_closed', message: `This help request was resolved already, by ${alan.email}.` });
    }
    expect((await helpAudit()).at(-1)).toEqual({
      action: 'help.resolve',
      actor: alan.email,
      target: `help_request:${help.id}`,
      metadata: { workspaceId: ada.workspace.id, slug: ada.workspace.slug, student: ada.email, from: 'taken', takenBy: grace.email },
    });
  });

  it('resolves a waiting one directly, and refuses a withdrawn one with 409 `help_request_closed`', async () => {
    const help = await raised(ada);
    expect((await resolve(grace, help.id)).status).toBe(200);
    expect((await helpAudit()).at(-1)!.metadata).toMatchObject({ from: 'waiting', takenBy: null });
    const withdrawn = await raised(bob);
    await withdraw(bob);
    const refused = await resolve(grace, withdrawn.id);
    expect(refused.status).toBe(409);
    expect(errorOf(refused)).toEqual({ code: 'help_request_closed', message: 'The student withdrew this help request.' });
  });

  it("refuses a student resolving or taking anyone's request (403): the request stays waiting", async () => {
    const help = await raised(ada);
    for (const attempt of [await resolve(ada, help.id), await resolve(bob, help.id), await take(bob, help.id)]) {
      expect(attempt.status).toBe(403);
      expect(errorOf(attempt).code).toBe('forbidden');
    }
    expect(await mine(ada)).toMatchObject({ state: 'waiting' });
  });
});

describe('bad input', () => {
  it(`refuses a message over ${HELP_MESSAGE_MAX} characters, or not text, with 400 naming \`message\`; nothing is raised`, async () => {
    expect((await raise(ada, 'é'.repeat(HELP_MESSAGE_MAX))).status).toBe(201);
    await withdraw(ada);
    for (const message of ['x'.repeat(HELP_MESSAGE_MAX + 1), 42, { text: 'hi' }]) {
      const refused = await raise(ada, message);
      expect(refused.status).toBe(400);
      expect(errorOf(refused)).toEqual({ code: 'validation_error', message: expect.stringContaining('message') });
    }
    const extra = await call(ada, 'POST', helpOf(ada), { message: 'hi', urgent: true });
    expect(extra.status).toBe(400);
    expect(await mine(ada)).toBeNull();
  });

  it('answers 404 `help_request_not_found` to a take or a resolve of an unknown id, or of text that is no id', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      for (const attempt of [await take(grace, id), await resolve(grace, id)]) {
        expect(attempt.status).toBe(404);
        expect(errorOf(attempt)).toEqual({ code: 'help_request_not_found', message: `No help request ${JSON.stringify(id)}.` });
      }
    }
  });
});

describe('the rate limit', () => {
  it(`refuses a workspace's raise past ${HELP_RAISES_PER_WINDOW} in 10 minutes with 429 \`too_many_help_requests\` and Retry-After; another student still may`, async () => {
    for (let count = 0; count < HELP_RAISES_PER_WINDOW; count++) {
      expect((await raise(ada)).status).toBe(201);
      expect((await withdraw(ada)).status).toBe(200);
    }
    const refused = await raise(ada, 'please');
    expect(refused.status).toBe(429);
    expect(errorOf(refused)).toEqual({
      code: 'too_many_help_requests',
      message: expect.stringMatching(/^You asked for help 5 times in the last 10 minutes: try again in \d+ minutes?\.$/),
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(600);
    expect(await mine(ada)).toBeNull();
    expect((await raise(bob)).status).toBe(201);
  });

  it('does not count a raise refused because one is open', async () => {
    await raised(ada);
    for (let count = 0; count < HELP_RAISES_PER_WINDOW; count++) expect((await raise(ada)).status).toBe(409);
    await withdraw(ada);
    expect((await raise(ada)).status).toBe(201);
  });
});

/** An admin's open `/admin/events` stream: what it received so far, and a wait for a text to arrive. */
interface Stream {
  text: () => string;
  /** Resolves once the stream has received `expected` `times` times (rejects after 10 s, or when the stream ends first). */
  receives: (expected: string, times?: number) => Promise<void>;
  close: () => void;
}

/** How many times `text` holds `part`. */
const count = (text: string, part: string) => text.split(part).length - 1;

/** Opens `/admin/events` as `coach`; resolves once the stream's first comment arrived. */
function openEvents(coach: Student): Promise<Stream> {
  return new Promise((opened, reject) => {
    const request = http.get(`${app.url}/admin/events`, { headers: { cookie: coach.cookie } }, (response) => {
      if (response.statusCode !== 200) return reject(new Error(`status ${response.statusCode}`));
      let text = '';
      const receives = (expected: string, times = 1) =>
        new Promise<void>((heard, missed) => {
          if (count(text, expected) >= times) return heard();
          const done = (error?: Error) => {
            clearTimeout(timer);
            response.off('data', onData).off('close', onClose);
            if (error) missed(error);
            else heard();
          };
          const timer = setTimeout(() => done(new Error(`${expected} not received ${times} times within 10 s; received ${text}`)), 10_000);
          const onData = () => count(text, expected) >= times && done();
          const onClose = () => done(new Error(`the stream ended before ${expected}`));
          response.on('data', onData).on('close', onClose);
        });
      response.on('data', (chunk: Buffer) => {
        const first = text === '';
        text += chunk.toString();
        if (first) opened({ text: () => text, receives, close: () => request.destroy() });
      });
    });
    request.on('error', reject);
  });
}

describe('live', () => {
  it("tells an admin's open panel of every raise, take, resolve and withdrawal as a `help` change naming the request", async () => {
    const stream = await openEvents(alan);
    try {
      const help = await raised(ada, 'hello');
      const change = `event: change\ndata: {"kind":"help","id":"${help.id}"}\n\n`;
      await stream.receives(change, 1);
      await take(grace, help.id);
      await stream.receives(change, 2);
      await resolve(grace, help.id);
      await stream.receives(change, 3);
      const other = await raised(bob);
      await withdraw(bob);
      const otherChange = `event: change\ndata: {"kind":"help","id":"${other.id}"}\n\n`;
      // A raise and a withdrawal.
      await expect(stream.receives(otherChange, 2)).resolves.toBeUndefined();
    } finally {
      stream.close();
    }
  });
});
