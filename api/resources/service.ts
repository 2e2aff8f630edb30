/**
 * The service's own operations: the health checks (`/healthz`, `/readyz`), Prometheus `/metrics`,
 * this API's OpenAPI document, and the signed-in user (`/auth/me`).
 */
import Type from 'typebox';
import { SERVICE } from '../../src/package-info.ts';
import { presentUser } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

/** How long the database check may take before the health checks call it failed. */
const CHECK_TIMEOUT_MS = 2000;

/** The database check: a short word, never an error's details. */
async function checkDatabase(ping: () => Promise<void>): Promise<'ok' | 'unreachable' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(resolve, CHECK_TIMEOUT_MS, 'timeout')));
  const query = ping().then(
    () => 'ok' as const,
    () => 'unreachable' as const,
  );
  try {
    return await Promise.race([query, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** 200 when the database answers (the server serves only after its migrations ran); else 503 naming the failed checks. */
export const health = operation({
  method: 'get',
  path: '/healthz',
  summary: 'Whether the control plane serves: the database answers and migrations ran.',
  auth: 'none',
  tag: 'service',
  noStore: true,
  responses: { 200: json(Wire.Health, 'Healthy.'), 503: json(Wire.Health, 'Not healthy: `failed` names the checks.') },
  handle: async (_input, { ping }) => {
    const checks = { database: await checkDatabase(ping) };
    const failed = Object.entries(checks)
      .filter(([, result]) => result !== 'ok')
      .map(([name]) => name);
    const body = { service: SERVICE.name, version: SERVICE.version, checks };
    return failed.length === 0 ? { status: 200, body: { ok: true, ...body } } : { status: 503, body: { ok: false, ...body, failed } };
  },
});

/**
 * For a load balancer: 200 when it may send this replica new connections; 404 while it should not
 * (ServerStore.draining: it stops, or another replica stops and a newer one runs), its open
 * connections kept; 503 when the database does not answer.
 */
export const readiness = operation({
  method: 'get',
  path: '/readyz',
  summary:
    "Whether a load balancer should send this replica new connections (HAProxy's `http-check disable-on-404`): 404 while it stops (it finishes what it has, sent nothing new) and while another replica stops and a newer one runs, so that the editors it lets go land on the newest.",
  auth: 'none',
  tag: 'service',
  noStore: true,
  responses: {
    200: json(Wire.Readiness, 'Ready.'),
    404: json(Wire.Readiness, 'Draining: keep its connections, send it no new ones.'),
    503: json(Wire.Readiness, 'Not ready: the database does not answer.'),
  },
  handle: async (_input, { ping, draining }) => {
    const database = await checkDatabase(ping);
    const drains = database === 'ok' && (await draining().catch(() => false));
    const status = database !== 'ok' ? 503 : drains ? 404 : 200;
    return { status, body: { ready: status === 200, draining: drains, checks: { database } } };
  },
});

export const metrics = operation({
  method: 'get',
  path: '/metrics',
  summary: 'Prometheus metrics (text exposition format).',
  auth: 'metrics',
  tag: 'service',
  noStore: true,
  responses: { 200: { text: 'text/plain; version=0.0.4', description: 'The metrics.' } },
  handle: async ({ ctx }, deps) => {
    ctx.set('Content-Type', deps.metrics.registry.contentType);
    ctx.body = await deps.metrics.registry.metrics();
  },
});

/** The document, made at its first request (TypeBox and every schema are loaded by then). */
let document: Promise<string> | undefined;

export const openApi = operation({
  method: 'get',
  path: '/openapi.json',
  summary: 'This document.',
  auth: 'none',
  tag: 'service',
  responses: { 200: json(Type.Object({}, { description: 'An OpenAPI 3.1 document.' }), 'The OpenAPI 3.1 document.') },
  handle: async () => {
    document ??= import('../openapi.ts').then((module) => module.openApiText());
    return { status: 200, serialized: await document };
  },
});

export const me = operation({
  method: 'get',
  path: '/auth/me',
  summary: 'The signed-in user.',
  auth: 'signed-in',
  tag: 'service',
  responses: { 200: json(Wire.UserAnswer, 'The user.') },
  handle: ({ user }) => ({ status: 200, body: { user: presentUser(user) } }),
});
