/**
 * The one shape of every error the control plane answers, `{"error": {"code", "message"}}`, and
 * the writers of it for the places outside Koa (the proxy and requests that never reach a router).
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { ErrorCode } from '../src/error-codes.ts';
import type { AppError } from '../src/errors.ts';
import type { ErrorBody } from '../src/wire/schemas.ts';
import { NO_FRAMES } from './middleware/frames.ts';

/** The JSON body of an error: a stable snake_case code and a message safe to show. */
export function errorBody(code: ErrorCode, message: string): ErrorBody {
  return { error: { code, message } };
}

/** Writes an error as JSON on a raw Node response (never cached), with its headers (Retry-After, Allow). */
export function sendError(res: http.ServerResponse, error: AppError): void {
  const body = JSON.stringify(errorBody(error.code, error.message));
  res.writeHead(error.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...error.headers,
  });
  res.end(body);
}

/** Writes an HTML page on a raw Node response (never cached, never framed). */
export function sendHtml(res: http.ServerResponse, status: number, html: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(html), 'cache-control': 'no-store', ...NO_FRAMES });
  res.end(html);
}

/** Redirects a raw Node response (302, never cached), with `headers` of its own (cookies, a referrer policy). */
export function redirect(res: http.ServerResponse, location: string, status = 302, headers: Record<string, string | string[]> = {}): void {
  res.writeHead(status, { location, 'content-length': 0, 'cache-control': 'no-store', ...headers });
  res.end();
}

/** How long a refused upgrade's client has to read the answer and close before its socket is destroyed (a client may never close its side). */
const REFUSED_GRACE_MS = 2000;

/**
 * Refuses a WebSocket upgrade: a whole HTTP/1.1 response with the JSON error, then the socket ends,
 * and is destroyed REFUSED_GRACE_MS after the answer is written, whether or not the client closed.
 */
export function refuseUpgrade(socket: Duplex, error: AppError): void {
  socket.once('finish', () => {
    const grace = setTimeout(() => socket.destroy(), REFUSED_GRACE_MS);
    socket.once('close', () => clearTimeout(grace));
  });
  const body = JSON.stringify(errorBody(error.code, error.message));
  const headers = Object.entries(error.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n${headers}Connection: close\r\n\r\n${body}`,
  );
}

/** Completes WebSocket handshakes that are only to be closed (tryAgainLater): no server, no compression. */
const closingHandshakes = new WebSocketServer({ noServer: true, perMessageDeflate: false });

/**
 * Answers a WebSocket upgrade for something that is not there *for now* (a stopped workspace's
 * editor): the handshake completes and the socket is closed at once with 1013 Try Again Later and
 * `reason` (at most 123 bytes). Not a refused upgrade: VS Code's web client takes any refused
 * upgrade for a permanent failure and puts up its "Cannot reconnect" dialog at once, while a close
 * is a temporary one it retries quietly, so the editor's own word on the stop is what the student
 * sees (the classroom extension says who stopped the workspace and leads to its page).
 */
export function tryAgainLater(req: http.IncomingMessage, socket: Duplex, head: Buffer, reason: string): void {
  closingHandshakes.handleUpgrade(req, socket, head, (ws) => ws.close(1013, reason));
}
