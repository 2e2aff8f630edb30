/**
 * Issue 39, finding 8, in real Chromium: the pages we ship follow a run's output by themselves past
 * a refusal. With one output stream per user allowed and that one held elsewhere, the workspace
 * page's stream and the panel's run page's stream are refused (429, which closes an EventSource for
 * good); once the other stream is closed, each page opens its stream again and shows the whole
 * output, nothing lost and nothing twice. The run's output is written as the collector writes it
 * (RunStore.appendOutput, then published in this process), on the real app and PostgreSQL.
 */
import type { Browser, Page } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let app: TestApp;
let browser: Browser;

beforeAll(async () => {
  app = await startApp(db.dataSource, { OUTPUT_STREAMS_PER_USER: '1' });
  browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
}, 60_000);

/** A student whose workspace is wanted running, with a run that has printed `text` so far. */
async function studentWithRun(name: string, text: string): Promise<{ student: Student; runId: string; print: (more: string) => Promise<void> }> {
  const student = await newStudent(app.store, name, tag);
  await app.store.workspaces.open(student.workspace.id);
  const run = await app.store.runs.create(student.workspace.id);
  let length = 0;
  const print = async (more: string) => {
    await app.store.runs.appendOutput([{ runId: run.id, offset: length, text: more, sourceBytes: length + more.length, truncated: false }]);
    app.store.changes.publishOutput({ runId: run.id, offset: length, text: more });
    length += more.length;
  };
  await print(text);
  return { student, runId: run.id, print };
}

/** Holds `who`'s one output stream of `runId` open until `close`. */
async function holdStream(url: string, who: Student): Promise<() => void> {
  const abort = new AbortController();
  const answer = await fetch(url, { headers: { cookie: who.cookie }, signal: abort.signal });
  expect(answer.status).toBe(200);
  void answer.body!.pipeTo(new WritableStream()).catch(() => undefined);
  return () => abort.abort();
}

const refusals = async () => (await app.metrics.runOutputStreamRefusals.get()).values.find((value) => value.labels.bound === 'user')?.value ?? 0;
const open = async () => (await app.metrics.runOutputStreams.get()).values[0]?.value ?? 0;

/**
 * With `who`'s one stream held, `show` opens the page (whose stream is refused); then the held one is
 * closed and more is printed. Resolves with what the page's element `output` shows once the last of it is there.
 */
async function resumesPastRefusal(
  who: Student,
  streamUrl: string,
  run: { print: (more: string) => Promise<void> },
  page: Page,
  show: () => Promise<void>,
  output: string,
) {
  const release = await holdStream(streamUrl, who);
  const before = await refusals();
  await show();
  await eventually("the page's stream refused", async () => (await refusals()) > before, 30_000);
  release();
  await eventually('the held stream given back', async () => (await open()) === 0);
  await run.print('second line\n');
  await page.locator(output).filter({ hasText: 'second line' }).waitFor({ timeout: 30_000 });
  return page.locator(output).textContent();
}

it('the workspace page opens a refused output stream again and shows the whole output', async () => {
  const { student, runId, print } = await studentWithRun('ada', 'first line\n');
  await withPage(browser, async (page) => {
    await signIn(page, student);
    const shown = await resumesPastRefusal(
      student,
      `${app.url}/u/${student.workspace.slug}/api/runs/${runId}/output`,
      { print },
      page,
      () => gotoAndWait(page, `${app.url}/u/${student.workspace.slug}/.cp/`, page.locator('h1'), 'output-resume-workspace-page'),
      '#output',
    );
    // Nothing lost, nothing twice.
    expect(shown).toBe('first line\nsecond line\n');
  });
}, 90_000);

it("the panel's run page opens a refused output stream again and shows the whole output", async () => {
  const coach = await newStudent(app.store, 'coach', tag, 'admin');
  const { runId, print } = await studentWithRun('bob', 'first line\n');
  await withPage(browser, async (page) => {
    await signIn(page, coach);
    const shown = await resumesPastRefusal(
      coach,
      `${app.url}/admin/runs/${runId}/output`,
      { print },
      page,
      () => gotoAndWait(page, `${app.url}/panel/runs/${runId}`, page.locator('main h1').filter({ hasText: 'Run of' }), 'output-resume-panel'),
      'pre[aria-label="Output of the run"]',
    );
    expect(shown).toBe('first line\nsecond line\n');
  });
}, 90_000);
