// @lane local
/**
 * Issue 14 (security review): no answer of an editor, over HTTP or in a WebSocket handshake, can
 * set, clear or shadow the control plane's session cookie. The editor here is a hostile one on
 * loopback (as a student's code could make it answer), behind the real proxy, app and PostgreSQL;
 * no controller runs, so the workspace record pointing at it stays as the test sets it.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, setEditor, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let ada: Student;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  app = await startApp(db.dataSource);
  ada = await newStudent(app.store, 'ada', Date.now().toString(36));
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});
afterAll(async () => app.close());

/** The Set-Cookie lines a hostile editor sends for our session cookie, in every spelling a browser would still take for it. */
const HOSTILE_COOKIES = [
  'cp_session=stolen; Path=/',
  'cp_session =stolen; Path=/',
  'cp_session\t=stolen; Path=/',
  'CP_Session=stolen; Path=/',
  'cp_session.sig =forged; Path=/',
  'cp_session.sig=; Max-Age=0; Path=/',
];

/** Points Ada's workspace, running, at `server` (listening on loopback), with a cold cache. */
async function editorIs(server: net.Server): Promise<void> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  const { port } = server.address() as net.AddressInfo;
  await setEditor(db.dataSource, app.store.changes, ada.workspace.id, `127.0.0.1:${port}`);
}

const wsUrl = () => `${app.url.replace('http', 'ws')}/u/${ada.workspace.slug}/ws`;

/** Opens a WebSocket as Ada; resolves with the handshake's answer (101 or not) and, when upgraded, the socket. */
function handshake(): Promise<{ answer: http.IncomingMessage; socket?: WebSocket }> {
  const socket = new WebSocket(wsUrl(), { headers: { cookie: ada.cookie, origin: app.url } });
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
    const editor = http.createServer((_req, res) => {
      res.setHeader('set-cookie', [...HOSTILE_COOKIES, 'theme=dark']);
      res.setHeader('clear-site-data', '"cookies", "storage"');
      res.end('ok');
    });
    await editorIs(editor);
    const response = await fetch(`${app.url}/u/${ada.workspace.slug}/x`, { headers: { cookie: ada.cookie } });
    expect(response.status).toBe(200);
    expect(response.headers.getSetCookie()).toEqual(['theme=dark']);
    expect(response.headers.get('clear-site-data')).toBeNull();
  });
});

describe("an editor's WebSocket handshake", () => {
  it('never passes on a Set-Cookie for our session nor Clear-Site-Data in its 101, and the tunnel then works', async () => {
    const wss = new WebSocketServer({ noServer: true });
    wss.on('headers', (headers) => headers.push(...[...HOSTILE_COOKIES, 'theme=dark'].map((cookie) => `Set-Cookie: ${cookie}`), 'Clear-Site-Data: "*"'));
    wss.on('connection', (socket) => socket.on('message', (data, binary) => socket.send(data, { binary })));
    const editor = http.createServer();
    editor.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req)));
    closers.push(async () => wss.close());
    await editorIs(editor);
    const { answer, socket } = await handshake();
    expect(answer.statusCode).toBe(101);
    expect(answer.headers['set-cookie']).toEqual(['theme=dark']);
    expect(answer.headers['clear-site-data']).toBeUndefined();
    const echoed = new Promise<string>((resolve) => socket!.once('message', (data: Buffer) => resolve(data.toString())));
    socket!.send('hello');
    expect(await echoed).toBe('hello');
    socket!.close();
  });

  it('passes on a refusal (not 101) filtered alike', async () => {
    const editor = net.createServer((socket) =>
      socket.once('data', () =>
        socket.end(`HTTP/1.1 404 Not Found\r\nSet-Cookie: cp_session =stolen\r\nClear-Site-Data: "cookies"\r\nContent-Length: 4\r\n\r\nnope`),
      ),
    );
    await editorIs(editor);
    const { answer } = await handshake();
    expect(answer.statusCode).toBe(404);
    expect(answer.headers['set-cookie']).toBeUndefined();
    expect(answer.headers['clear-site-data']).toBeUndefined();
  });

  it('answers 502 when the head is not valid HTTP (a bare CR could smuggle a header past the filter)', async () => {
    const editor = net.createServer((socket) =>
      socket.once('data', (request: Buffer) => {
        const key = /sec-websocket-key: *(\S+)/i.exec(request.toString())![1];
        const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        socket.write(
          `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nX-A: 1\rSet-Cookie: cp_session=stolen\r\n\r\n`,
        );
      }),
    );
    await editorIs(editor);
    const { answer } = await handshake();
    expect(answer.statusCode).toBe(502);
    expect(answer.headers['set-cookie']).toBeUndefined();
  });
});
