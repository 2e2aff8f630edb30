/**
 * Issue 14 (security review): no answer of an editor, over HTTP or in a WebSocket handshake, can
 * set, clear or shadow the control plane's session cookie. The editor is a real container of the
 * test image, the workspace's as the engine reports it, made to answer as a hostile one would (as a
 * student's code could make it answer), behind the real proxy, app and PostgreSQL.
 */
import type http from 'node:http';
import WebSocket from 'ws';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { extraHeaders, rawAnswer } from '../helpers/stand-ins.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let ada: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource);
  harness = createHarness(db.dataSource, { changes: app.store.changes });
  await harness.controller.start();
  ada = await newStudent(app.store, 'ada', Date.now().toString(36));
  ada.workspace = await openAndWait(harness.store, ada.workspace);
}, 30_000);
afterAll(async () => {
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
});

/** The Set-Cookie lines a hostile editor sends for our session cookie, in every spelling a browser would still take for it. */
const HOSTILE_COOKIES = [
  'cp_session=stolen; Path=/',
  'cp_session =stolen; Path=/',
  'cp_session\t=stolen; Path=/',
  'CP_Session=stolen; Path=/',
  'cp_session.sig =forged; Path=/',
  'cp_session.sig=; Max-Age=0; Path=/',
];

/** Opens a WebSocket to Ada's editor at `path`; resolves with the handshake's answer (101 or not) and, when upgraded, the socket. */
function handshake(path: string): Promise<{ answer: http.IncomingMessage; socket?: WebSocket }> {
  const socket = new WebSocket(`${app.url.replace('http', 'ws')}/u/${ada.workspace.slug}${path}`, { headers: { cookie: ada.cookie, origin: app.url } });
  return new Promise((resolve, reject) => {
    socket.once('upgrade', (answer) => socket.once('open', () => resolve({ answer, socket })));
    socket.once('unexpected-response', (request, answer) => {
      resolve({ answer });
      answer.resume();
      request.destroy();
    });
    socket.once('error', reject);
  });
}

describe("an editor's HTTP answer", () => {
  it('never passes on a Set-Cookie for our session in any spelling, nor Clear-Site-Data', async () => {
    const head = [...HOSTILE_COOKIES, 'theme=dark'].map((cookie) => `Set-Cookie: ${cookie}\r\n`).join('');
    const answer = rawAnswer(`HTTP/1.1 200 OK\r\n${head}Clear-Site-Data: "cookies", "storage"\r\nContent-Length: 2\r\n\r\nok`);
    const response = await fetch(`${app.url}/u/${ada.workspace.slug}${answer}`, { headers: { cookie: ada.cookie } });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('ok');
    expect(response.headers.getSetCookie()).toEqual(['theme=dark']);
    expect(response.headers.get('clear-site-data')).toBeNull();
  });
});

describe("an editor's WebSocket handshake", () => {
  it('never passes on a Set-Cookie for our session nor Clear-Site-Data in its 101, and the tunnel then works', async () => {
    const lines = [...[...HOSTILE_COOKIES, 'theme=dark'].map((cookie) => `Set-Cookie: ${cookie}`), 'Clear-Site-Data: "*"'];
    const { answer, socket } = await handshake(`/ws?${extraHeaders(lines)}`);
    expect(answer.statusCode).toBe(101);
    expect(answer.headers['set-cookie']).toEqual(['theme=dark']);
    expect(answer.headers['clear-site-data']).toBeUndefined();
    const echoed = new Promise<string>((resolve) => socket!.once('message', (data: Buffer) => resolve(data.toString())));
    socket!.send('hello');
    expect(await echoed).toBe('hello');
    socket!.close();
  });

  it('passes on a refusal (not 101) filtered alike', async () => {
    const { answer } = await handshake(
      rawAnswer(
        'HTTP/1.1 404 Not Found\r\nSet-Cookie: cp_session =stolen\r\nSet-Cookie: theme=dark\r\nClear-Site-Data: "cookies"\r\nContent-Length: 4\r\n\r\nnope',
      ),
    );
    expect(answer.statusCode).toBe(404);
    expect(answer.headers['set-cookie']).toEqual(['theme=dark']);
    expect(answer.headers['clear-site-data']).toBeUndefined();
  });

  it('answers 502 when the head is not valid HTTP (a bare CR could smuggle a header past the filter)', async () => {
    const head = (separator: string) =>
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nX-A: 1${separator}Set-Cookie: cp_session=stolen\r\n\r\n`;
    const { answer } = await handshake(rawAnswer(head('\r')));
    expect(answer.statusCode).toBe(502);
    expect(answer.headers['set-cookie']).toBeUndefined();
    // The same head with its line ended properly is a 101 (its cookie dropped): the bare CR alone made it a 502.
    const proper = await handshake(rawAnswer(head('\r\n')));
    expect(proper.answer.statusCode).toBe(101);
    expect(proper.answer.headers['x-a']).toBe('1');
    expect(proper.answer.headers['set-cookie']).toBeUndefined();
    proper.socket!.terminate();
  });
});
