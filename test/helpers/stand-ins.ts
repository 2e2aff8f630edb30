/**
 * The test image's stand-ins (test/fixtures/workspace: the editor, editor.mjs; the simulator,
 * sim.mjs) from a test's side, each in a real container that the engine reports as a workspace's
 * editor or a run's simulator (WorkspaceRuntime.serving, as the proxy finds it): the request paths
 * that make the editor play a hostile one, the requests a stand-in logged, what a simulator's robot
 * heard on HALSim, and pages stored in a home for the editor to serve. A test reaches a container straight at its address only to set
 * it up or to ask what it saw, never instead of the proxy.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { ServingContainer, ServingTarget, WorkspaceRuntime } from '../../src/docker/runtime.ts';
import { eventually, TEST_ENV } from './controllers.ts';

/** The port the simulator stand-in serves its alive probe and NetworkTables on (NT4_PORT's default). */
export const NT4_PORT = 5810;

/** The editor's request path (from the root) whose answer is exactly `bytes` (latin1: one character a byte); on an upgrade, `{accept}` in them is the computed Sec-WebSocket-Accept. */
export const rawAnswer = (bytes: string): string => `/raw?b64=${Buffer.from(bytes, 'latin1').toString('base64url')}`;

/** The query that makes the editor's 101 carry these header lines too. */
export const extraHeaders = (lines: string[]): string => `headers=${Buffer.from(lines.join('\r\n'), 'latin1').toString('base64url')}`;

/** Where `target`'s live container serves (its editor, or with a run id its simulator), as the engine reports it now; fails when none runs. */
export async function servingOf(runtime: WorkspaceRuntime, target: ServingTarget): Promise<ServingContainer> {
  const found = await runtime.serving(target, target.runId === undefined ? Number(TEST_ENV.EDITOR_PORT) : NT4_PORT);
  if (!found) throw new Error(`no live container serves ${JSON.stringify(target)}`);
  return found;
}

/** One request straight to `endpoint` (`host:port`) on a connection of its own, closed after the answer. */
export function direct(endpoint: string, path: string, init: { method?: string; body?: string } = {}): Promise<{ status: number; body: string }> {
  const at = endpoint.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: endpoint.slice(0, at), port: Number(endpoint.slice(at + 1)), path, method: init.method ?? 'GET', agent: false },
      (answer) => {
        let body = '';
        answer.on('data', (chunk: Buffer) => (body += chunk.toString()));
        answer.on('end', () => resolve({ status: answer.statusCode ?? 0, body }));
      },
    );
    request.on('error', reject);
    request.end(init.body);
  });
}

/**
 * Every request the stand-in in `container` has logged so far ("<METHOD> <url>", " (upgrade)" after
 * an upgrade's), oldest first: a request sent to it before this call is in the list. (A mark sent
 * to it now is waited for in its log, which keeps the order it was written in.)
 */
export async function requestsSeen(runtime: WorkspaceRuntime, container: ServingContainer): Promise<string[]> {
  const mark = `/test-mark-${randomBytes(6).toString('hex')}`;
  await direct(container.endpoint, mark);
  const lines = await eventually(`the stand-in to log ${mark}`, async () => {
    const logged = (await runtime.logsTail(container.id, 100_000)).split('\n');
    return logged.includes(`GET ${mark}`) && logged;
  });
  return lines.slice(0, lines.indexOf(`GET ${mark}`)).filter((line) => /^[A-Z]+ \//.test(line) && !line.startsWith('GET /test-mark-'));
}

/** What the simulator stand-in's robot heard on its HALSim WebSocket (test/fixtures/workspace/halsim.mjs). */
export interface RobotHeard {
  /** Clients it took, and clients it refused (it takes one at a time). */
  connections: number;
  refused: number;
  /** Whether a client is connected now, and whether what it sent last left the robot enabled. */
  connected: boolean;
  enabled: boolean;
  /** Each upgrade's Cookie and Origin (null: none), oldest first. */
  upgrades: { cookie: string | null; origin: string | null }[];
  /** Every message it was sent, oldest first: on which of its connections (1, 2, ...), when (its clock, ms) and as sent. */
  received: { connection: number; at: number; text: string }[];
  /** Its clock now (ms). */
  now: number;
}

/**
 * What the robot of a run (`target` with its run id) heard on its HALSim WebSocket so far, asked of
 * the simulator stand-in straight. With `holdMs`, the robot is first made slow to let go of its
 * client: from then on, after each message it reads, it reads nothing for that long (a close that
 * follows is answered that much later).
 */
export async function robotHeard(runtime: WorkspaceRuntime, target: ServingTarget, holdMs?: number): Promise<RobotHeard> {
  const answer = await direct((await servingOf(runtime, target)).endpoint, holdMs === undefined ? '/halsim' : `/halsim?hold=${holdMs}`);
  if (answer.status !== 200) throw new Error(`the simulator did not say what its robot heard: ${answer.status} ${answer.body}`);
  return JSON.parse(answer.body) as RobotHeard;
}

/** Stores `body` as `name` in the home of a workspace whose editor is `editor`, which then serves it at `.../www/<name>`. */
export async function storePage(editor: ServingContainer, name: string, body: string): Promise<void> {
  const answer = await direct(editor.endpoint, `/www/${name}`, { method: 'PUT', body });
  if (answer.status !== 201) throw new Error(`the editor did not store www/${name}: ${answer.status} ${answer.body}`);
}
