/**
 * Host mode (WORKSPACE_HOST) from a test's side: requests to `*.localhost` names sent to loopback,
 * as a browser does, and the hand-over that gives a browser a workspace's cookie on its own host.
 */
import http from 'node:http';
import type { LookupFunction } from 'node:net';

/** Sends `*.localhost` names to loopback, as Chromium does itself; anything else is refused. */
export const loopback: LookupFunction = (hostname, options, callback) => {
  if (hostname !== '127.0.0.1' && !hostname.endsWith('.localhost')) return callback(new Error(`not a loopback name: ${hostname}`), '', 4);
  if (options.all)
    return (callback as unknown as (error: null, addresses: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  callback(null, '127.0.0.1', 4);
};

/** An answer as it came (no redirect followed). */
export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP request as written (no redirect followed), `*.localhost` names on loopback. */
export function send(url: string, init: { method?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: init.method ?? 'GET', headers: init.headers, lookup: loopback }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

/** What a browser sends with a navigation it starts itself. */
export const NAVIGATE = { accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document', 'sec-fetch-site': 'none' };

/** The value of the cookie `name` a response sets (the first such line), or undefined. */
export function setCookie(answer: Answer, name: string): string | undefined {
  const line = (answer.headers['set-cookie'] ?? []).find((candidate) => candidate.startsWith(`${name}=`));
  return line?.slice(name.length + 1).split(';', 1)[0];
}

/**
 * The whole hand-over of a workspace's host (`origin`, e.g. `http://ada.ws.localhost:8080`) to a
 * browser signed in to the control plane with `cookie`: the value of the workspace cookie (`cp_ws`)
 * it ends with. Fails when a step does not redirect as it should.
 */
export async function handOver(origin: string, cookie: string): Promise<string> {
  const setOut = await send(`${origin}/`, { headers: NAVIGATE });
  const state = setCookie(setOut, 'cp_ws_state');
  if (setOut.status !== 302 || !state) throw new Error(`the workspace's host did not send the browser to the control plane: ${setOut.status}`);
  const mint = await send(setOut.headers.location!, { headers: { ...NAVIGATE, 'sec-fetch-site': 'cross-site', cookie } });
  if (mint.status !== 302) throw new Error(`the control plane did not hand over: ${mint.status} ${mint.body}`);
  const redeem = await send(mint.headers.location!, { headers: { ...NAVIGATE, 'sec-fetch-site': 'cross-site', cookie: `cp_ws_state=${state}` } });
  const grant = setCookie(redeem, 'cp_ws');
  if (redeem.status !== 302 || !grant) throw new Error(`the workspace's host did not take the code: ${redeem.status} ${redeem.body}`);
  return grant;
}
