/**
 * Issue 14, host mode (WORKSPACE_HOST): each workspace on an origin of its own, `<slug>.ws.localhost:<port>`
 * here, served by the same process, with its own cookie handed over from the control plane's
 * session by a one-time code. Against the real app, PostgreSQL, Docker and server process: each
 * workspace's editor is a real container of the test image, made to answer as a hostile one would
 * (as a student's code could make code-server answer), behind the real proxy. Requests reach the
 * workspace hosts through a lookup that sends `*.localhost` to 127.0.0.1, as a browser does.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { OWNER_ONLY_MESSAGE } from '../../api/proxy/admission.ts';
import { GrantSigner } from '../../api/proxy/handoff.ts';
import { HANDOFF_TTL_MS, HandoffStore } from '../../src/store/handoffs.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, TEST_SESSION_SECRET, type TestApp } from '../helpers/app.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { categoryLogger } from '../../src/log.ts';
import { captureLogger, createHarness, eventually, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { handOver, loopback, NAVIGATE, send, setCookie } from '../helpers/host-mode.ts';
import { freePort, spawnServer } from '../helpers/server.ts';
import { sessionFor } from '../helpers/session.ts';
import { extraHeaders, rawAnswer, requestsSeen, servingOf } from '../helpers/stand-ins.ts';
import { closesWithin, echoes } from '../helpers/websocket.ts';
import { newStudent, openAndWait, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let port: number;
let app: TestApp;
let publicOrigin: string;
/**
 * The workspace controller, with a change feed of its own: what the tests do through the app's
 * store (a stop, a sign-out) reaches the proxy at once and the controller only at its resync, so an
 * editor stays up and a tunnel ends only if the proxy itself ends it.
 */
let harness: Harness;
let ada: Student;
let bob: Student;
let coach: Student;
let sid: Student;

/** The Set-Cookie lines an editor answers with, over HTTP and in a WebSocket handshake. */
const HOSTILE_COOKIES = [
  'cp_ws=forged; Path=/',
  '__Host-cp_ws=forged; Path=/; Secure',
  'CP_WS =forged; Path=/',
  'cp_ws_state=forged; Path=/',
  'cp_session=stolen; Path=/',
  'cp_session.sig=forged; Path=/',
  'tossed=1; Domain=ws.localhost; Path=/',
  'tossed2=1; path=/; domain=.ws.localhost',
  'tossed3=1;DOMAIN=',
  'theme=dark; Path=/',
  'editor-session=abc; HttpOnly; Path=/',
];
const KEPT_COOKIES = ['theme=dark; Path=/', 'editor-session=abc; HttpOnly; Path=/'];

const hostOf = (owner: Student) => `${owner.workspace.slug}.ws.localhost:${port}`;
const originOf = (owner: Student) => `http://${hostOf(owner)}`;

/** Step 1: a browser without the workspace's cookie opens `owner`'s host; returns its state cookie and where it is sent. */
async function setOut(owner: Student, path = '/', states: string[] = []): Promise<{ state: string; location: string }> {
  const answer = await send(`${originOf(owner)}${path}`, {
    headers: { ...NAVIGATE, ...(states.length > 0 && { cookie: states.map((state) => `cp_ws_state=${state}`).join('; ') }) },
  });
  expect(answer.status).toBe(302);
  const state = setCookie(answer, 'cp_ws_state')!;
  expect(state).toMatch(/^[\w-]{43}$/);
  return { state, location: answer.headers.location! };
}

/** Step 2: the control plane, with `cookie` (a session), hands over; returns the code's URL. */
async function mint(location: string, cookie: string): Promise<string> {
  const answer = await send(location, { headers: { ...NAVIGATE, 'sec-fetch-site': 'cross-site', cookie } });
  expect(answer.status).toBe(302);
  return answer.headers.location!;
}

/** Step 3: the workspace's host takes the code, with these state cookies. */
const redeem = (codeUrl: string, states: string[]) =>
  send(codeUrl, { headers: { ...NAVIGATE, 'sec-fetch-site': 'cross-site', cookie: states.map((state) => `cp_ws_state=${state}`).join('; ') } });

/** The control-plane session id in a student's cookie. */
const sessionIdOf = (student: Student) => /cp_session=([^;]+)/.exec(student.cookie)![1]!;

/** Every request `owner`'s editor has been sent so far (see requestsSeen). */
const seenBy = async (owner: Student) => requestsSeen(harness.runtime, await servingOf(harness.runtime, { workspaceId: owner.workspace.id }));

/** What `owner`'s editor answers a request on its host for `path` with: the request as it received it (its echo-headers). */
async function echoed(owner: Student, path: string, grants: string[], headers: Record<string, string> = {}) {
  const answer = await onHost(owner, path, grants, headers);
  expect(answer.status).toBe(200);
  return JSON.parse(answer.body) as { method: string; url: string; headers: Record<string, string | undefined> };
}

/** A request on `owner`'s host with `grants` as its workspace cookies (an API call unless `headers` say otherwise). */
const onHost = (owner: Student, path: string, grants: string[], headers: Record<string, string> = {}) =>
  send(`${originOf(owner)}${path}`, { headers: { ...(grants.length > 0 && { cookie: grants.map((grant) => `cp_ws=${grant}`).join('; ') }), ...headers } });

/** Opens a WebSocket on `owner`'s host; resolves with the socket once it echoes, or rejects with the refusal's status. */
function tunnel(owner: Student, grant: string | undefined, origin = originOf(owner), path = '/ws'): Promise<WebSocket> {
  const socket = new WebSocket(`ws://${hostOf(owner)}${path}`, {
    lookup: loopback,
    headers: { origin, ...(grant && { cookie: `cp_ws=${grant}; theme=dark` }) },
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, answer) => reject(new Error(`upgrade refused with ${answer.statusCode}`)));
  });
}

beforeAll(async () => {
  port = await freePort();
  publicOrigin = `http://127.0.0.1:${port}`;
  app = await startApp(db.dataSource, { PUBLIC_URL: publicOrigin, WORKSPACE_HOST: `*.ws.localhost:${port}` }, { port });
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  [ada, bob, coach, sid] = await Promise.all([
    newStudent(app.store, 'ada', tag),
    newStudent(app.store, 'bob', tag),
    newStudent(app.store, 'coach', tag, 'admin'),
    newStudent(app.store, 'sid', tag),
  ]);
  await Promise.all(
    [ada, bob, sid].map(async (student) => {
      student.workspace = await openAndWait(harness.store, student.workspace);
    }),
  );
}, 60_000);

afterAll(async () => {
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 30_000);

describe('configuration', () => {
  it('refuses to start with a WORKSPACE_HOST that is not "*." and a domain, or that is the control plane’s host or a parent of it', async () => {
    const bad = spawnServer({ WORKSPACE_HOST: 'ws.school.org/editor' });
    const parent = spawnServer({ WORKSPACE_HOST: '*.school.org', PUBLIC_URL: 'http://robots.school.org' });
    try {
      // A server that took either would keep running.
      const exited = (server: typeof bad) => Promise.race([server.exited, sleep(15_000).then(() => 'still running')]);
      expect(await Promise.all([exited(bad), exited(parent)])).toEqual([2, 2]);
      expect(bad.stderr).toEqual([
        expect.stringMatching(/^config: WORKSPACE_HOST="ws.school.org\/editor" is not valid: expected a wildcard host: "\*\." then a domain/),
      ]);
      expect(parent.stderr).toEqual([
        expect.stringMatching(/^config: WORKSPACE_HOST="\*\.school\.org" is not valid: its domain must not be the control plane's host/),
      ]);
    } finally {
      await Promise.all([bad.stop('SIGKILL'), parent.stop('SIGKILL')]);
    }
  });
});

describe('the workspace host', () => {
  it('serves the editor at its own origin after the hand-over, paths as they are, and nothing of the control plane', async () => {
    // From the control plane: /u/<slug>/ sends the owner to the workspace's own origin.
    const start = await send(`${publicOrigin}/u/${ada.workspace.slug}/?folder=/home`, { headers: { ...NAVIGATE, cookie: ada.cookie } });
    expect(start.status).toBe(302);
    expect(start.headers.location).toBe(`${originOf(ada)}/?folder=/home`);
    const { state, location } = await setOut(ada, '/?folder=/home');
    expect(location).toBe(
      `${publicOrigin}/auth/workspace/${ada.workspace.slug}?state=${createHash('sha256').update(state).digest('base64url')}&path=%2F%3Ffolder%3D%2Fhome`,
    );
    const codeUrl = await mint(location, ada.cookie);
    expect(codeUrl).toMatch(new RegExp(`^${originOf(ada).replaceAll('.', '\\.')}/\\.cp/handoff\\?code=[\\w-]{43}$`));
    const landed = await redeem(codeUrl, [state]);
    expect(landed.status).toBe(302);
    // Where it set out for, and no code left in the address.
    expect(landed.headers.location).toBe('/?folder=/home');
    expect(landed.headers['referrer-policy']).toBe('no-referrer');
    const lines = landed.headers['set-cookie']!;
    expect(lines).toEqual([
      expect.stringMatching(/^cp_ws=[\w-]+\.[\w-]{43}; Path=\/; Max-Age=86400; HttpOnly; SameSite=Lax$/),
      'cp_ws_state=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax',
    ]);
    expect(lines.join()).not.toMatch(/domain/i);
    const grant = setCookie(landed, 'cp_ws')!;

    // The control plane's paths on this host are the editor's: its student API is not here.
    const answer = await onHost(ada, `/u/${ada.workspace.slug}/api/workspace?x=1`, [grant], { authorization: 'Bearer x' });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(`<html><body>editor stand-in: /u/${ada.workspace.slug}/api/workspace</body></html>`);
    const echo = await echoed(ada, `/u/${ada.workspace.slug}/api/workspace/echo-headers?x=1`, [grant], { authorization: 'Bearer x' });
    expect(echo.url).toBe(`/u/${ada.workspace.slug}/api/workspace/echo-headers?x=1`);
    expect(echo.headers['x-forwarded-host']).toBe(hostOf(ada));
    expect(echo.headers['x-forwarded-prefix']).toBeUndefined();
    expect(echo.headers.authorization).toBeUndefined();
    // Under /.cp/ nothing is the editor's.
    const before = (await seenBy(ada)).length;
    expect((await onHost(ada, '/.cp/other', [grant])).status).toBe(404);
    await expect(tunnel(ada, grant, originOf(ada), '/.cp/handoff')).rejects.toThrow('upgrade refused with 404');
    expect((await seenBy(ada)).slice(before)).toEqual([]);
  });

  it("never passes the control plane's cookies or ours to the editor, only the editor's own", async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    const cookie = `theme=dark; ${ada.cookie}; cp_ws=${grant}; __Host-cp_ws=x; CP_WS=y; cp_ws_state=s; __Host-cp_ws_state=t; lang=en`;
    const answer = await send(`${originOf(ada)}/echo-headers`, { headers: { cookie } });
    expect(answer.status).toBe(200);
    const { headers } = JSON.parse(answer.body) as { headers: Record<string, string> };
    expect(headers.cookie).toBe('theme=dark; lang=en');
    // WebSockets likewise: the editor's first message is the upgrade request as it received it.
    const socket = new WebSocket(`ws://${hostOf(ada)}/ws/echo-headers`, { lookup: loopback, headers: { origin: originOf(ada), cookie } });
    const upgrade = await new Promise<{ url: string; headers: Record<string, string | undefined> }>((resolve, reject) => {
      socket.once('message', (data: Buffer) => resolve(JSON.parse(data.toString()) as { url: string; headers: Record<string, string | undefined> }));
      socket.once('error', reject);
    });
    socket.close();
    expect(upgrade.url).toBe('/ws/echo-headers');
    expect(upgrade.headers.cookie).toBe('theme=dark; lang=en');
    expect(upgrade.headers['x-forwarded-prefix']).toBeUndefined();
  });

  it('answers a host under the workspace domain that names no workspace with 404: a page for a browser, JSON otherwise', async () => {
    for (const host of [`nobody-${tag}.ws.localhost:${port}`, `ws.localhost:${port}`, `a.${ada.workspace.slug}.ws.localhost:${port}`]) {
      const page = await send(`http://${host}/`, { headers: NAVIGATE });
      expect(page.status).toBe(404);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.body).toContain('No such workspace');
      const api = await send(`http://${host}/x`);
      expect(api.status).toBe(404);
      expect(JSON.parse(api.body)).toEqual({ error: { code: 'not_found', message: 'There is no workspace at this address.' } });
    }
    // Another port of a workspace's name is not that workspace either.
    const elsewhere = await send(`${publicOrigin}/`, { headers: { host: `${ada.workspace.slug}.ws.localhost:1` } });
    expect(elsewhere.status).toBe(404);
    await expect(tunnel({ ...ada, workspace: { ...ada.workspace, slug: `nobody-${tag}` } }, undefined)).rejects.toThrow('upgrade refused with 404');
  });

  it('sends a navigation without a cookie to hand over, and refuses anything else 401 (HTTP and WebSocket)', async () => {
    const api = await onHost(ada, '/x', []);
    expect(api.status).toBe(401);
    expect(JSON.parse(api.body)).toEqual({ error: { code: 'authentication_required', message: 'Sign in to use this workspace.' } });
    await expect(tunnel(ada, undefined)).rejects.toThrow('upgrade refused with 401');
    // Signed out on the control plane: the hand-over sends the browser to sign in, and back.
    const { location } = await setOut(ada, '/deep?x=1');
    const signIn = await send(location, { headers: NAVIGATE });
    expect(signIn.status).toBe(302);
    expect(signIn.headers.location).toBe(`/auth/sign-in?return_to=${encodeURIComponent(new URL(location).pathname + new URL(location).search)}`);
  });

  it('sends navigations on the host of a stopped workspace to its page on the control plane', async () => {
    const grant = await handOver(originOf(sid), sid.cookie);
    // Stopped through the control plane, and by the controller (told as the server's one change feed would tell it).
    await app.store.workspaces.stop(SYSTEM_ACTOR, sid.workspace.id, 'student');
    harness.changes.publish({ kind: 'workspaces', id: sid.workspace.id });
    await waitForState(harness.store, sid.workspace.id, 'stopped');
    const page = await onHost(sid, '/', [grant], NAVIGATE);
    expect(page.status).toBe(302);
    expect(page.headers.location).toBe(`${publicOrigin}/u/${sid.workspace.slug}/`);
    expect((await onHost(sid, '/x', [grant])).status).toBe(503);
    // And the hand-over of a stopped workspace leads there too, where its Open button is.
    const { location } = await setOut(sid);
    const answer = await send(location, { headers: { ...NAVIGATE, cookie: sid.cookie } });
    expect(answer.status).toBe(302);
    expect(answer.headers.location).toBe(`/u/${sid.workspace.slug}/`);
    const workspacePage = await send(`${publicOrigin}/u/${sid.workspace.slug}/`, { headers: { ...NAVIGATE, cookie: sid.cookie } });
    expect(workspacePage.status).toBe(200);
    expect(workspacePage.body).toContain(`Workspace ${sid.workspace.slug}`);
  });

  it('refuses what another site (another workspace host included) sends it, but lets it open the workspace as a page', async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    const before = (await seenBy(ada)).length;
    const from = originOf(bob);
    const refused: Record<string, string>[] = [
      { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'empty' },
      { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty', origin: from },
      { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'iframe' },
      { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'script' },
    ];
    for (const headers of refused) expect((await onHost(ada, '/secret', [grant], headers)).status).toBe(403);
    // A form posted from elsewhere, with or without Fetch Metadata.
    expect((await send(`${originOf(ada)}/secret`, { method: 'POST', headers: { cookie: `cp_ws=${grant}`, origin: from } })).status).toBe(403);
    expect(
      (
        await send(`${originOf(ada)}/secret`, {
          method: 'POST',
          headers: { cookie: `cp_ws=${grant}`, origin: from, 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'navigate' },
        })
      ).status,
    ).toBe(403);
    // A WebSocket opened by another workspace's page.
    await expect(tunnel(ada, grant, from)).rejects.toThrow('upgrade refused with 403');
    await expect(tunnel(ada, grant, publicOrigin)).rejects.toThrow('upgrade refused with 403');
    expect((await seenBy(ada)).slice(before)).toEqual([]);
    // A link followed from anywhere opens the page; its own pages' requests pass.
    expect((await onHost(ada, '/page', [grant], { ...NAVIGATE, 'sec-fetch-site': 'same-site' })).status).toBe(200);
    expect((await onHost(ada, '/api', [grant], { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', origin: originOf(ada) })).status).toBe(200);
    expect((await send(`${originOf(ada)}/save`, { method: 'POST', headers: { cookie: `cp_ws=${grant}`, origin: originOf(ada) } })).status).toBe(200);
  });
});

describe('the hand-over code', () => {
  it('works once', async () => {
    const { state, location } = await setOut(ada);
    const codeUrl = await mint(location, ada.cookie);
    expect((await redeem(codeUrl, [state])).status).toBe(302);
    const again = await redeem(codeUrl, [state]);
    expect(again.status).toBe(400);
    expect(again.body).toContain('has expired or has been used already');
    expect(again.headers['set-cookie']).toBeUndefined();
  });

  it('expires after 60 seconds (by the database clock: any replica redeems it)', async () => {
    const first = await setOut(ada);
    const early = await mint(first.location, ada.cookie);
    const second = await setOut(ada);
    const late = await mint(second.location, ada.cookie);
    const hashOf = (codeUrl: string) => createHash('sha256').update(new URL(codeUrl).searchParams.get('code')!).digest('base64url');
    const lifetime = async (codeUrl: string) =>
      Number(
        (
          (await db.dataSource.query('SELECT extract(epoch FROM expires_at - now()) * 1000 AS ms FROM handoff_codes WHERE code_hash = $1', [
            hashOf(codeUrl),
          ])) as {
            ms: string;
          }[]
        )[0]!.ms,
      );
    expect(await lifetime(early)).toBeGreaterThan(HANDOFF_TTL_MS - 10_000);
    expect(await lifetime(early)).toBeLessThanOrEqual(HANDOFF_TTL_MS);
    // The late one's minute has passed; the early one has seconds left.
    await db.dataSource.query("UPDATE handoff_codes SET expires_at = now() - interval '1 second' WHERE code_hash = $1", [hashOf(late)]);
    await db.dataSource.query("UPDATE handoff_codes SET expires_at = now() + interval '2 seconds' WHERE code_hash = $1", [hashOf(early)]);
    expect((await redeem(early, [first.state])).status).toBe(302);
    const expired = await redeem(late, [second.state]);
    expect(expired.status).toBe(400);
    expect(expired.headers['set-cookie']).toBeUndefined();
  });

  it('works only in the browser that set out for it: another session’s code is refused', async () => {
    // Ada in two browsers (two sessions): the second is brought the code the first was given.
    const second = await sessionFor(app.store.sessions, ada.userId);
    const one = await setOut(ada);
    const two = await setOut(ada);
    expect(two.state).not.toBe(one.state);
    const codeOfOne = await mint(one.location, ada.cookie);
    await mint(two.location, second.cookie);
    const refused = await redeem(codeOfOne, [two.state]);
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('made for another browser');
    expect(refused.headers['set-cookie']).toBeUndefined();
    // Taken by that attempt: not even its own browser can use it now.
    expect((await redeem(codeOfOne, [one.state])).status).toBe(400);
    // Nor without any state cookie, or on another workspace's host.
    expect((await redeem(await mint((await setOut(ada)).location, ada.cookie), [])).status).toBe(400);
    const three = await setOut(ada);
    const onBob = (await mint(three.location, ada.cookie)).replace(hostOf(ada), hostOf(bob));
    const wrongHost = await redeem(onBob, [three.state]);
    expect(wrongHost.status).toBe(400);
    expect(wrongHost.body).toContain('for another workspace');
  });

  it('is refused once the session it came from has ended', async () => {
    const session = await sessionFor(app.store.sessions, ada.userId);
    const { state, location } = await setOut(ada);
    const codeUrl = await mint(location, session.cookie);
    const out = await send(`${publicOrigin}/auth/sign-out`, { method: 'POST', headers: { cookie: session.cookie, origin: publicOrigin } });
    expect(out.status).toBe(303);
    const answer = await redeem(codeUrl, [state]);
    expect(answer.status).toBe(400);
    expect(answer.headers['set-cookie']).toBeUndefined();
  });

  it('is kept only as its SHA-256, and is 32 random bytes', async () => {
    await db.dataSource.query('DELETE FROM handoff_codes');
    const codes = new HandoffStore(db.dataSource);
    const handoff = { userId: ada.userId, sessionId: 's', workspaceId: ada.workspace.id, stateHash: 'h', path: '/' };
    const code = await codes.issue(handoff);
    expect(Buffer.from(code, 'base64url')).toHaveLength(32);
    expect(await codes.storedKeys()).toEqual([createHash('sha256').update(code).digest('base64url')]);
    expect(JSON.stringify(await db.dataSource.query('SELECT * FROM handoff_codes'))).not.toContain(code);
    expect(await codes.take(code)).toEqual(handoff);
    expect(await codes.take(code)).toBeUndefined();
  });

  it('is not given for a workspace the user may not open, nor to a script or a frame', async () => {
    const { location } = await setOut(ada);
    const other = await send(location, { headers: { ...NAVIGATE, cookie: bob.cookie } });
    expect(other.status).toBe(403);
    expect(other.body).toContain('This workspace is not yours.');
    expect(
      (await send(location, { headers: { cookie: ada.cookie, 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty', 'sec-fetch-site': 'cross-site' } })).status,
    ).toBe(403);
    expect(
      (await send(location, { headers: { cookie: ada.cookie, 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'iframe', 'sec-fetch-site': 'cross-site' } }))
        .status,
    ).toBe(403);
    expect((await send(location.replace(/state=[^&]+/, 'state=x'), { headers: { ...NAVIGATE, cookie: ada.cookie } })).status).toBe(400);
  });
});

describe('the workspace cookie', () => {
  it('is valid for its workspace only: refused on another workspace’s host', async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    expect((await onHost(ada, '/x', [grant])).status).toBe(200);
    expect((await onHost(bob, '/x', [grant])).status).toBe(401);
    await expect(tunnel(bob, grant, originOf(bob))).rejects.toThrow('upgrade refused with 401');
  });

  it('refuses a forged, unsigned, re-signed or expired one', async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    const [payload, mac] = grant.split('.') as [string, string];
    const fields = JSON.parse(Buffer.from(payload, 'base64url').toString()) as [string, string, string, number];
    const edited = Buffer.from(JSON.stringify([coach.userId, fields[1], fields[2], fields[3]])).toString('base64url');
    const otherKey = new GrantSigner('another-secret-0123456789abcdef-0123');
    const forgeries = [
      `${edited}.${mac}`,
      payload,
      `${payload}.`,
      'forged',
      otherKey.sign({ userId: ada.userId, workspaceId: ada.workspace.id, sessionId: fields[2], expiresAt: Date.now() + 60_000 }),
      new GrantSigner(TEST_SESSION_SECRET).sign({ userId: ada.userId, workspaceId: ada.workspace.id, sessionId: fields[2], expiresAt: Date.now() - 1 }),
      // Right key and fields, but a session that does not exist, or that is someone else's (an admin's).
      new GrantSigner(TEST_SESSION_SECRET).sign({
        userId: ada.userId,
        workspaceId: ada.workspace.id,
        sessionId: 'no-such-session',
        expiresAt: Date.now() + 60_000,
      }),
      new GrantSigner(TEST_SESSION_SECRET).sign({
        userId: ada.userId,
        workspaceId: ada.workspace.id,
        sessionId: sessionIdOf(coach),
        expiresAt: Date.now() + 60_000,
      }),
    ];
    for (const forged of forgeries) expect((await onHost(ada, '/x', [forged])).status).toBe(401);
  });

  it('takes, of several, the one that is valid for this workspace and ignores the rest', async () => {
    const adas = await handOver(originOf(ada), ada.cookie);
    const bobs = await handOver(originOf(bob), bob.cookie);
    const before = (await seenBy(ada)).length;
    // As a sibling's page could set them for the whole workspace domain; none of them reaches the editor.
    expect((await echoed(ada, '/echo-headers', ['forged', bobs, adas])).headers.cookie).toBeUndefined();
    expect((await echoed(ada, '/echo-headers', [adas, 'forged'])).headers.cookie).toBeUndefined();
    expect((await onHost(ada, '/echo-headers', ['forged', bobs])).status).toBe(401);
    expect((await seenBy(ada)).slice(before)).toEqual(['GET /echo-headers', 'GET /echo-headers']);
  });

  it("carries no admin power, so an admin may open a student's workspace in host mode", async () => {
    const start = await send(`${publicOrigin}/u/${ada.workspace.slug}/`, { headers: { ...NAVIGATE, cookie: coach.cookie } });
    expect(start.status).toBe(302);
    expect(start.headers.location).toBe(`${originOf(ada)}/`);
    const grant = await handOver(originOf(ada), coach.cookie);
    expect((await onHost(ada, '/x', [grant])).status).toBe(200);
    // Another student is refused, on the control plane and in the hand-over.
    const refused = await send(`${publicOrigin}/u/${ada.workspace.slug}/`, { headers: { ...NAVIGATE, cookie: bob.cookie } });
    expect(refused.status).toBe(403);
    // The control plane's admin API knows nothing of it, on either origin.
    expect((await send(`${publicOrigin}/admin/users`, { headers: { cookie: `cp_ws=${grant}` } })).status).toBe(401);
    const onWorkspaceHost = await onHost(ada, '/admin/users', [grant], { accept: 'application/json' });
    expect(onWorkspaceHost.status).toBe(200);
    expect(onWorkspaceHost.body).toBe('<html><body>editor stand-in: /admin/users</body></html>');
  });

  it('ends with the control-plane session it came from (sign-out), HTTP and WebSocket', async () => {
    const session = await sessionFor(app.store.sessions, ada.userId);
    const grant = await handOver(originOf(ada), session.cookie);
    const bystander = await tunnel(ada, await handOver(originOf(ada), ada.cookie));
    const socket = await tunnel(ada, grant);
    await echoes(socket);
    expect((await onHost(ada, '/x', [grant])).status).toBe(200);
    const out = await send(`${publicOrigin}/auth/sign-out`, { method: 'POST', headers: { cookie: session.cookie, origin: publicOrigin } });
    expect(out.status).toBe(303);
    expect(await closesWithin(socket, 1000)).toBe(true);
    expect((await onHost(ada, '/x', [grant])).status).toBe(401);
    await echoes(bystander);
    bystander.close();
  });
});

describe("the editor's answers on its host", () => {
  it('drop any Set-Cookie of ours or the control plane’s, or with a Domain, and Clear-Site-Data; keep its own host-only cookies', async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    const head = HOSTILE_COOKIES.map((line) => `Set-Cookie: ${line}\r\n`).join('');
    const answer = await onHost(ada, rawAnswer(`HTTP/1.1 200 OK\r\n${head}Clear-Site-Data: "cookies"\r\nContent-Length: 7\r\n\r\ncookies`), [grant]);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('cookies');
    expect(answer.headers['set-cookie']).toEqual(KEPT_COOKIES);
    expect(answer.headers['clear-site-data']).toBeUndefined();
  });

  it('drop them from a WebSocket handshake too', async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    const lines = [...HOSTILE_COOKIES.map((line) => `Set-Cookie: ${line}`), 'Clear-Site-Data: "cookies"'];
    const socket = new WebSocket(`ws://${hostOf(ada)}/ws?${extraHeaders(lines)}`, {
      lookup: loopback,
      headers: { origin: originOf(ada), cookie: `cp_ws=${grant}` },
    });
    const answer = await new Promise<http.IncomingMessage>((resolve, reject) => {
      socket.once('upgrade', resolve);
      socket.once('error', reject);
    });
    expect(answer.headers['set-cookie']).toEqual(KEPT_COOKIES);
    expect(answer.headers['clear-site-data']).toBeUndefined();
    socket.close();
  });
});

describe('the control plane in host mode', () => {
  it('tells the browser where the editor is, and serves no editor WebSocket on its own origin', async () => {
    const answer = await send(`${publicOrigin}/u/${ada.workspace.slug}/api/workspace`, { headers: { cookie: ada.cookie } });
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as { workspace: { editorUrl: string } }).workspace.editorUrl).toBe(`${originOf(ada)}/`);
    const socket = new WebSocket(`ws://127.0.0.1:${port}/u/${ada.workspace.slug}/ws`, { headers: { origin: publicOrigin, cookie: ada.cookie } });
    const status = await new Promise<number>((resolve) => {
      socket.once('open', () => resolve(101));
      socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
    });
    expect(status).toBe(404);
  });

  it('sends a signed-out browser to sign in, and answers an API client 401', async () => {
    const page = await send(`${publicOrigin}/u/${ada.workspace.slug}/x`, { headers: NAVIGATE });
    expect(page.status).toBe(302);
    expect(page.headers.location).toBe(`/auth/sign-in?return_to=${encodeURIComponent(`/u/${ada.workspace.slug}/x`)}`);
    expect((await send(`${publicOrigin}/u/${ada.workspace.slug}/x`)).status).toBe(401);
  });

  it('points the 403 of path mode at what exists', () => {
    expect(OWNER_ONLY_MESSAGE).toContain('ask the student');
    expect(OWNER_ONLY_MESSAGE).toContain('WORKSPACE_HOST');
    expect(OWNER_ONLY_MESSAGE).not.toContain("admin panel's host-mode link");
  });
});

describe("the editor's channel on its own host: the student API at /.cp/api/ and the simulator at /.cp/nt4/", () => {
  const send2 = (owner: Student, path: string, grant: string | undefined, init: { method?: string; headers?: Record<string, string> } = {}) =>
    send(`${originOf(owner)}${path}`, { method: init.method, headers: { ...(grant && { cookie: `cp_ws=${grant}` }), ...init.headers } });

  it("answers the workspace's own student API to its pages, as the cookie's user, and nothing of it reaches the editor", async () => {
    const grant = await handOver(originOf(ada), ada.cookie);
    const from = (await seenBy(ada)).length;
    const view = await send2(ada, '/.cp/api/workspace', grant, { headers: { 'sec-fetch-site': 'same-origin' } });
    expect(view.status).toBe(200);
    expect((JSON.parse(view.body) as { workspace: { slug: string } }).workspace.slug).toBe(ada.workspace.slug);
    const keep = await send2(ada, '/.cp/api/workspace/keep', grant, { method: 'POST', headers: { 'sec-fetch-site': 'same-origin', origin: originOf(ada) } });
    expect(keep.status).toBe(200);
    expect((await seenBy(ada)).slice(from)).toEqual([]);
  });

  it("refuses another workspace's cookie, no cookie, another site's request, and a path that climbs out", async () => {
    const [adaGrant, bobGrant] = [await handOver(originOf(ada), ada.cookie), await handOver(originOf(bob), bob.cookie)];
    expect((await send2(ada, '/.cp/api/workspace', bobGrant)).status).toBe(401);
    expect((await send2(ada, '/.cp/api/workspace', undefined)).status).toBe(401);
    // Bob's page (same site, another origin) cannot use Ada's.
    const fromBob = await send2(ada, '/.cp/api/workspace/keep', adaGrant, {
      method: 'POST',
      headers: { 'sec-fetch-site': 'same-site', origin: originOf(bob) },
    });
    expect(fromBob.status).toBe(403);
    // As sent (a URL would have its dots resolved first).
    const climbing = await new Promise<number>((resolve, reject) =>
      http
        .get({ host: '127.0.0.1', port, path: '/.cp/api/../../admin/status', headers: { host: hostOf(ada), cookie: `cp_ws=${adaGrant}` } }, (answer) =>
          resolve(answer.resume().statusCode ?? 0),
        )
        .on('error', reject),
    );
    expect(climbing).toBe(400);
    expect((await send2(ada, '/.cp/other', adaGrant)).status).toBe(404);
  });

  it("opens the simulator's NetworkTables only with the workspace's cookie, from its own origin, while a run has one", async () => {
    const [adaGrant, bobGrant] = [await handOver(originOf(ada), ada.cookie), await handOver(originOf(bob), bob.cookie)];
    const refusal = (grant: string, origin = originOf(ada)) =>
      tunnel(ada, grant, origin, '/.cp/nt4/nt/test').then(
        () => 101,
        (error: Error) => Number(/(\d{3})$/.exec(error.message)?.[1]),
      );
    const before = (await seenBy(ada)).length;
    // No run here: admitted, then told there is no simulator (the editor is never asked).
    expect(await refusal(adaGrant)).toBe(503);
    expect(await refusal(bobGrant)).toBe(401);
    expect(await refusal(adaGrant, originOf(bob))).toBe(403);
    expect((await seenBy(ada)).slice(before)).toEqual([]);
  });

  it("serves the workspace page's Driver Station at /.cp/driver-station as a page of its own, with the workspace's cookie only, framed by no one", async () => {
    const [adaGrant, bobGrant] = [await handOver(originOf(ada), ada.cookie), await handOver(originOf(bob), bob.cookie)];
    // Opened in a tab by the workspace page, on the control plane's site.
    const OPENED = { ...NAVIGATE, 'sec-fetch-site': 'cross-site' };
    const before = (await seenBy(ada)).length;
    const page = await send2(ada, '/.cp/driver-station', adaGrant, { headers: OPENED });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<main id="ds">');
    const policy = page.headers['content-security-policy'] as string;
    expect(policy).toMatch(/^default-src 'none'; script-src 'sha256-[\w+/=]+'; style-src 'sha256-[\w+/=]+'; connect-src 'self'; .*frame-ancestors 'none'$/);
    // Without the workspace's cookie, or with another's, it is handed over as any page of the host.
    for (const grant of [undefined, bobGrant]) {
      const answer = await send2(ada, '/.cp/driver-station', grant, { headers: OPENED });
      expect(answer.status).toBe(302);
      expect(answer.headers.location).toContain(`${publicOrigin}/`);
    }
    // Another site's page may not frame it or load it otherwise; and only GET and HEAD.
    expect(
      (await send2(ada, '/.cp/driver-station', adaGrant, { headers: { ...NAVIGATE, 'sec-fetch-site': 'same-site', 'sec-fetch-dest': 'iframe' } })).status,
    ).toBe(403);
    expect(
      (await send2(ada, '/.cp/driver-station', adaGrant, { headers: { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' } }))
        .status,
    ).toBe(403);
    expect(
      (await send2(ada, '/.cp/driver-station', adaGrant, { method: 'POST', headers: { 'sec-fetch-site': 'same-origin', origin: originOf(ada) } })).status,
    ).toBe(405);
    // The editor is never asked.
    expect((await seenBy(ada)).slice(before)).toEqual([]);
  });
});

describe('an open WebSocket on a workspace host ends within a second of a revocation', () => {
  /** Owners of running workspaces, one per revocation (Boss an admin). */
  let owner: Student;
  let boss: Student;
  let fay: Student;
  let hal: Student;
  let gus: Student;

  beforeAll(async () => {
    const opened = async (local: string, role: 'user' | 'admin' = 'user') => {
      const student = await newStudent(app.store, local, tag, role);
      student.workspace = await openAndWait(harness.store, student.workspace);
      return student;
    };
    [owner, boss, fay, hal, gus] = await Promise.all([opened('own'), opened('boss', 'admin'), opened('fay'), opened('hal'), opened('gus')]);
  }, 60_000);

  it('when its user is demoted and it is not theirs; a demoted admin keeps their session and their own workspace, and no longer opens a student’s', async () => {
    const head = await newStudent(app.store, 'head', tag, 'admin');
    const bystander = await tunnel(owner, await handOver(originOf(owner), owner.cookie));
    const viewing = await tunnel(owner, await handOver(originOf(owner), head.cookie));
    const own = await tunnel(boss, await handOver(originOf(boss), boss.cookie));
    // Boss first: by the time head's viewing tunnel closes, the check of boss's (an earlier change) has run.
    await app.store.users.demote(SYSTEM_ACTOR, boss.userId);
    await app.store.users.demote(SYSTEM_ACTOR, head.userId);
    expect(await closesWithin(viewing, 1000)).toBe(true);
    await echoes(bystander);
    bystander.close();
    // Their own stays.
    await echoes(own);
    own.close();
    // Still signed in, as students now: the rule decides.
    expect((await send(`${publicOrigin}/u/${owner.workspace.slug}/`, { headers: { ...NAVIGATE, cookie: head.cookie } })).status).toBe(403);
    const mine = await tunnel(boss, await handOver(originOf(boss), boss.cookie));
    await echoes(mine);
    mine.close();
  });

  it('when its workspace is stopped, or given to someone else, or its user deleted', async () => {
    const stopped = await tunnel(fay, await handOver(originOf(fay), fay.cookie));
    await app.store.workspaces.stop(SYSTEM_ACTOR, fay.workspace.id, 'coach');
    expect(await closesWithin(stopped, 1000)).toBe(true);

    const given = await tunnel(hal, await handOver(originOf(hal), hal.cookie));
    const [other] = (await db.dataSource.query("INSERT INTO users (email, name) VALUES ($1, '') RETURNING id", [`other-${tag}@school.test`])) as {
      id: string;
    }[];
    await db.dataSource.query('UPDATE workspaces SET user_id = $2 WHERE id = $1', [hal.workspace.id, other!.id]);
    app.store.changes.publish({ kind: 'workspaces', id: hal.workspace.id });
    expect(await closesWithin(given, 1000)).toBe(true);

    const deleted = await tunnel(gus, await handOver(originOf(gus), gus.cookie));
    await app.store.users.delete(SYSTEM_ACTOR, gus.userId);
    expect(await closesWithin(deleted, 1000)).toBe(true);
  });
});

describe('two replicas on one database (issue 23)', () => {
  let portB: number;
  let appB: TestApp;
  const feedB = new ChangeFeed();
  const log = captureLogger();
  const hostOnB = (owner: Student) => `${owner.workspace.slug}.ws.localhost:${portB}`;

  beforeAll(async () => {
    portB = await freePort();
    // B hears what A commits through LISTEN, as a replica does.
    feedB.listen(db.url, categoryLogger(log.root, 'db'));
    appB = await startApp(
      db.dataSource,
      { PUBLIC_URL: `http://127.0.0.1:${portB}`, WORKSPACE_HOST: `*.ws.localhost:${portB}` },
      { port: portB, changes: feedB },
    );
    await eventually('B to listen', async () => log.records.some((record) => record.message === 'change listener connected'));
  });
  afterAll(async () => {
    await appB?.close();
    await feedB.close();
  });

  it('redeems on one replica a hand-over code that the other issued', async () => {
    const { state, location } = await setOut(ada);
    const codeUrl = await mint(location, ada.cookie);
    const onB = codeUrl.replace(`:${port}/`, `:${portB}/`);
    expect(onB).toMatch(new RegExp(`^http://${ada.workspace.slug}\\.ws\\.localhost:${portB}/\\.cp/handoff\\?code=`));
    const answer = await redeem(onB, [state]);
    expect(answer.status).toBe(302);
    expect(setCookie(answer, 'cp_ws')).toMatch(/\S/);
    // Taken once: not again on the replica that issued it.
    expect((await redeem(codeUrl, [state])).status).toBe(400);
  });

  it('ends within a second, on both replicas, the 50 editor WebSockets of a session signed out on one of them', async () => {
    const session = await sessionFor(app.store.sessions, ada.userId);
    const grant = await handOver(originOf(ada), session.cookie);
    const open = (host: string) =>
      new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(`ws://${host}/ws`, { lookup: loopback, headers: { origin: `http://${host}`, cookie: `cp_ws=${grant}` } });
        socket.once('open', () => resolve(socket));
        socket.once('error', reject);
      });
    // Spread over both: 25 through the replica signed out on (A), 25 through the other (B).
    const sockets = await Promise.all(Array.from({ length: 50 }, (_, i) => open(i % 2 === 0 ? hostOf(ada) : hostOnB(ada))));
    await Promise.all(sockets.map(echoes));
    const closed = sockets.map((socket) => closesWithin(socket, 1000));
    const out = await send(`${publicOrigin}/auth/sign-out`, { method: 'POST', headers: { cookie: session.cookie, origin: publicOrigin } });
    expect(out.status).toBe(303);
    expect(await Promise.all(closed)).toEqual(sockets.map(() => true));
  });

  it('checks every open WebSocket again when its change listener comes back: what it missed meanwhile takes effect', async () => {
    const session = await sessionFor(app.store.sessions, ada.userId);
    const grant = await handOver(originOf(ada), session.cookie);
    const onB = new WebSocket(`ws://${hostOnB(ada)}/ws`, { lookup: loopback, headers: { origin: `http://${hostOnB(ada)}`, cookie: `cp_ws=${grant}` } });
    await new Promise((resolve, reject) => (onB.once('open', resolve), onB.once('error', reject)));
    await echoes(onB);
    // The session ends with no announcement at all (as if its NOTIFY fell into the gap), then B's listener is cut.
    await db.dataSource.query('DELETE FROM sessions WHERE id = $1', [/cp_session=([^;]+)/.exec(session.cookie)![1]]);
    const reconnects = log.records.filter((record) => record.message === 'change listener reconnected').length;
    const [{ cut }] = (await db.dataSource.query(
      "SELECT count(pg_terminate_backend(pid))::int AS cut FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
    )) as [{ cut: number }];
    expect(cut).toBe(1);
    await eventually('B to reconnect', async () => log.records.filter((record) => record.message === 'change listener reconnected').length > reconnects);
    expect(await closesWithin(onB, 1000)).toBe(true);
  });
});
