/**
 * Handing out a lesson of SIZE_MB (default 20) to STUDENTS (default 50) running workspaces, against
 * copying the same files into each with `docker cp`, in the same run:
 *
 * - ours: the coach's upload (`POST /admin/lessons`, a .tar.gz of the lesson's folder, with a
 *   signed-in admin session), then `POST .../handout {all:true}` and the time until every delivery
 *   is `delivered` (read as the panel reads it, GET /admin/lessons/{id}, every 100 ms): the lesson
 *   controller listing each home's `lessons/` and writing the version through a helper container,
 *   4 homes at a time, while the workspace controller, the stats sampler, the idle sweep and the
 *   proxy run beside it as deployed;
 * - baseline: `docker cp <the lesson's folder> <code container>:/home/student/baseline-<n>` into each
 *   editor container, one after another, then the same with 4 at a time (what an operator would
 *   script), timed the same way.
 *
 * The lesson is SIZE_MB of incompressible files (200 of them) in a few folders, unpacked on disk for
 * the baseline and tarred and gzipped for the upload. Also reports the control plane's CPU seconds
 * (this process's: it serves in-process) during our handout. The workspaces run the test image
 * (classroom-workspace:test, 64 MiB each); everything is removed at the end; aborts after 15 minutes.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/lesson-handout.ts
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { names } from '../src/docker/runtime.ts';
import { benchDatabase, CONTROL_PLANE_LABEL, controlPlane, deadline, loadAverage, processCpuSeconds, removeLabelled, signedSessionCookie } from './lib.ts';

const STUDENTS = Math.max(1, Number(process.env.STUDENTS ?? 50));
const SIZE_MB = Math.max(1, Number(process.env.SIZE_MB ?? 20));
const FILES = 200;
const DATABASE = 'cp_bench_lessons';
const run = promisify(execFile);

const { dataSource, drop } = await benchDatabase(DATABASE);
const secret = randomBytes(32).toString('hex');
const { plane, store, controlPlaneId } = controlPlane(dataSource, {
  parts: ['changes', 'activity', 'http', 'workspaces', 'stats', 'idle', 'lessons', 'sessions'],
  listen: { port: 0, host: '127.0.0.1' },
  allowlist: { isAllowed: () => true },
  sessionSecret: secret,
});
const scratch = mkdtempSync(path.join(os.tmpdir(), 'cp-bench-lessons-'));
const cleanup = async () => {
  await plane.stop().catch(() => undefined);
  await removeLabelled(CONTROL_PLANE_LABEL, controlPlaneId);
  await drop();
  rmSync(scratch, { recursive: true, force: true });
};
deadline(15 * 60_000, cleanup);

try {
  await plane.start();
  const origin = plane.http!.url;
  const tag = Date.now().toString(36);

  // The lesson: FILES incompressible files in 10 folders, SIZE_MB in all, on disk and as a .tar.gz.
  const folder = path.join(scratch, 'lesson');
  const pack = tar.pack();
  const fileBytes = Math.floor((SIZE_MB * 1024 * 1024) / FILES);
  for (let i = 0; i < FILES; i++) {
    const name = `part-${i % 10}/file-${i}.bin`;
    const bytes = randomBytes(fileBytes);
    mkdirSync(path.join(folder, path.dirname(name)), { recursive: true });
    writeFileSync(path.join(folder, name), bytes);
    pack.entry({ name, mode: 0o644 }, bytes);
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  const archive = gzipSync(Buffer.concat(chunks), { level: 1 });

  // The class, each editor running.
  const { user: coach } = await store.users.create({ email: `coach-${tag}@school.test`, role: 'admin' });
  const cookie = await signedSessionCookie(dataSource, coach.id, secret);
  const students = [];
  for (let i = 0; i < STUDENTS; i++) students.push((await store.users.create({ email: `student${i}-${tag}@school.test` })).workspace);
  const opening = Date.now();
  for (const workspace of students) await store.workspaces.open(workspace.id);
  for (let until = Date.now() + 10 * 60_000; ; await sleep(500)) {
    const running = (await store.workspaces.list()).filter((each) => each.status.observedState === 'running' && each.status.editorEndpoint).length;
    if (running === STUDENTS) break;
    if (Date.now() > until) throw new Error(`only ${running} of ${STUDENTS} workspaces running after 10 minutes`);
  }
  console.log(`${STUDENTS} workspaces running in ${((Date.now() - opening) / 1000).toFixed(1)} s; load ${loadAverage()}`);

  const call = async (method: string, url: string, body?: Buffer | object) => {
    const headers: Record<string, string> = { cookie, origin, accept: 'application/json' };
    if (body) headers['content-type'] = Buffer.isBuffer(body) ? 'application/gzip' : 'application/json';
    const init: RequestInit = { method, headers };
    if (body) init.body = Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body);
    const answer = await fetch(`${origin}${url}`, init);
    const text = await answer.text();
    if (!answer.ok) throw new Error(`${method} ${url}: ${answer.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };

  // Ours.
  const cpuBefore = processCpuSeconds(process.pid);
  const uploadAt = Date.now();
  const { lesson } = (await call('POST', `/admin/lessons?name=Bench-${tag}`, archive)) as { lesson: { id: string } };
  const uploadMs = Date.now() - uploadAt;
  const handoutAt = Date.now();
  await call('POST', `/admin/lessons/${lesson.id}/handout`, { all: true });
  for (let until = Date.now() + 10 * 60_000; ; await sleep(100)) {
    const { lesson: now } = (await call('GET', `/admin/lessons/${lesson.id}`)) as {
      lesson: { deliveries: { pending: number; delivered: number; failed: number } };
    };
    if (now.deliveries.failed > 0) throw new Error(`${now.deliveries.failed} deliveries failed`);
    if (now.deliveries.delivered === STUDENTS) break;
    if (Date.now() > until) throw new Error(`only ${now.deliveries.delivered} of ${STUDENTS} delivered after 10 minutes`);
  }
  const oursMs = Date.now() - handoutAt;
  const cpu = processCpuSeconds(process.pid) - cpuBefore;

  // The baseline: docker cp into each editor container, one at a time, then 4 at a time.
  const containers = students.map((workspace) => names.code(workspace.slug));
  const copy = (container: string, n: string) => run('docker', ['cp', folder, `${container}:/home/student/baseline-${n}`]);
  const serialAt = Date.now();
  for (const container of containers) await copy(container, 'serial');
  const serialMs = Date.now() - serialAt;
  const parallelAt = Date.now();
  const queue = [...containers];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) await copy(next, 'parallel');
    }),
  );
  const parallelMs = Date.now() - parallelAt;

  const mbs = (ms: number) => ((SIZE_MB * STUDENTS) / (ms / 1000)).toFixed(1);
  console.log(`lesson: ${SIZE_MB} MB in ${FILES} files (upload ${(archive.length / 1024 / 1024).toFixed(1)} MB gzipped), ${STUDENTS} workspaces running`);
  console.log(`upload (POST /admin/lessons): ${uploadMs} ms`);
  console.log(
    `ours, handout to every home delivered: ${(oursMs / 1000).toFixed(1)} s (${mbs(oursMs)} MB/s, ${(oursMs / STUDENTS).toFixed(0)} ms a home); control plane CPU ${cpu.toFixed(1)} s`,
  );
  console.log(`docker cp one at a time: ${(serialMs / 1000).toFixed(1)} s (${mbs(serialMs)} MB/s); ours / it = ${(oursMs / serialMs).toFixed(2)}`);
  console.log(`docker cp 4 at a time: ${(parallelMs / 1000).toFixed(1)} s (${mbs(parallelMs)} MB/s); ours / it = ${(oursMs / parallelMs).toFixed(2)}`);
  console.log(`machine: ${os.cpus().length} cores, load ${loadAverage()}; ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
} finally {
  await cleanup();
}
process.exit(0);
