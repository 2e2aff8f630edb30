/**
 * The admin panel in real Chromium (the tests' Debian build, through playwright-core) against a
 * control plane on loopback, with 500 workspaces and 1,000,000 audit entries:
 *
 * - first load of the panel (a fresh browser profile) and a reload with a warm cache: bytes
 *   transferred, requests, and time to interactive (navigation start → the overview's data on the
 *   screen), against a bare navigation to `/healthz` in the same run;
 * - the Workspaces page with 500 rows: time from its data's arrival (the API response's end) to
 *   the rows in the document and painted (target < 200 ms), against the same rows built with plain
 *   DOM calls in the same page from the same JSON;
 * - the audit log paged with "Load more" (50 entries a page) newest first, six months back, and with
 *   an actor and an action filter: each page end to end, click → rows painted (target < 100 ms),
 *   against the admin API's own answer for the same page fetched from the same page.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/panel.ts
 *
 * Makes its own database `cp_bench_panel` on the provisioned PostgreSQL and drops it at the end;
 * aborts after 10 minutes. REPS sets the repetitions of the load and render cases (default 10).
 */
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser } from '../test/helpers/browser.ts';
import { auditRowsSql, benchDatabase, controlPlane, deadline, median, percentile, signedSessionCookie, MID_SESSION_SQL } from './lib.ts';

const REPS = Math.max(5, Number(process.env.REPS ?? 10));
const WORKSPACES = 500;
const AUDIT_ROWS = 1_000_000;
const DAY_MS = 86_400_000;

/** Times the page records itself (performance.now(), ms since its navigation started). */
interface Marks {
  /** The page's heading is in and nothing says "Loading…". */
  ready?: number;
  readyPainted?: number;
  /** `tbody tr` reached the count asked for. */
  rows?: number;
  rowsPainted?: number;
}

/**
 * Runs in the page before its own scripts: records when it became ready and when its table reached
 * `target` rows, and when each was next painted (a frame, then a task after it).
 */
function recordMarks(target: number): void {
  const marks: Marks = {};
  /** Resolves once what the document holds now has been painted: the next frame, then a task after it. */
  const nextPaint = () =>
    new Promise<void>((resolve) =>
      requestAnimationFrame(() => {
        const channel = new MessageChannel();
        channel.port1.addEventListener('message', () => resolve(), { once: true });
        channel.port1.start();
        channel.port2.postMessage(null);
      }),
    );
  Object.assign(globalThis, { __marks: marks, __nextPaint: nextPaint });
  const painted = (key: 'readyPainted' | 'rowsPainted') => void nextPaint().then(() => (marks[key] = performance.now()));
  new MutationObserver(() => {
    if (marks.ready === undefined && document.querySelector('main h1') && !document.querySelector('.loading')) {
      marks.ready = performance.now();
      painted('readyPainted');
    }
    if (marks.rows === undefined && target > 0 && document.querySelectorAll('tbody tr').length >= target) {
      marks.rows = performance.now();
      painted('rowsPainted');
    }
  }).observe(document, { childList: true, subtree: true });
}

/** What recordMarks leaves in the page for the benchmark's own code there. */
interface Painter {
  __nextPaint(): Promise<void>;
}

async function marksOf(page: Page, keys: (keyof Marks)[]): Promise<Marks> {
  await page.waitForFunction((wanted) => {
    const marks = (globalThis as unknown as { __marks?: Marks }).__marks;
    return marks !== undefined && wanted.every((key) => marks[key] !== undefined);
  }, keys);
  return page.evaluate(() => (globalThis as unknown as { __marks: Marks }).__marks);
}

/** Bytes transferred and requests made by the page so far (the document and every finished resource). */
function transferred(page: Page): Promise<{ bytes: number; requests: number; decoded: number }> {
  return page.evaluate(() => {
    const entries = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')] as PerformanceResourceTiming[];
    return {
      bytes: entries.reduce((sum, entry) => sum + entry.transferSize, 0),
      decoded: entries.reduce((sum, entry) => sum + entry.decodedBodySize, 0),
      requests: entries.filter((entry) => entry.transferSize > 0).length,
    };
  });
}

const ms = (values: number[]) =>
  `median ${median(values).toFixed(1).padStart(6)} ms  p90 ${percentile(values, 90).toFixed(1).padStart(6)} ms  max ${Math.max(...values)
    .toFixed(1)
    .padStart(6)} ms`;

const { dataSource, drop } = await benchDatabase('cp_bench_panel');
deadline(10 * 60_000, drop);
const secret = randomBytes(32).toString('hex');
const { plane, store } = controlPlane(dataSource, {
  parts: ['changes', 'http'],
  listen: { port: 0, host: '127.0.0.1' },
  sessionSecret: secret,
  allowlist: { isAllowed: () => true },
});
let browser: Browser | undefined;
try {
  const loading = performance.now();
  const tag = randomBytes(3).toString('hex');
  const { user: coach } = await store.users.create({ email: `coach-${tag}@school.test`, role: 'admin' });
  for (let i = 0; i < WORKSPACES; i += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, j) => store.users.create({ email: `student${String(i + j).padStart(3, '0')}-${tag}@school.test` })));
  }
  // A class mid-session: a mix of states, status messages and activity, as the sampler and controllers leave them.
  await dataSource.query(MID_SESSION_SQL);
  const runner = dataSource.createQueryRunner();
  await runner.query('SELECT setseed(0.42)');
  await runner.query(auditRowsSql(AUDIT_ROWS));
  await runner.release();
  await dataSource.query('VACUUM ANALYZE');
  console.log(`loaded ${WORKSPACES} workspaces and ${AUDIT_ROWS} audit entries in ${((performance.now() - loading) / 1000).toFixed(1)} s`);

  await plane.start();
  const origin = plane.http!.url;
  const cookie = (await signedSessionCookie(dataSource, coach.id, secret)).split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
  browser = await launchBrowser({ full: true });
  const signedInPage = async (target = 0) => {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 }, serviceWorkers: 'block' });
    await context.addCookies(cookie);
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    await page.addInitScript(recordMarks, target);
    return page;
  };

  // First load, and a reload with the cache warm, against a bare navigation.
  const bare: number[] = [];
  const cold: number[] = [];
  const warm: number[] = [];
  let coldBytes = { bytes: 0, requests: 0, decoded: 0 };
  let warmBytes = { bytes: 0, requests: 0, decoded: 0 };
  for (let i = 0; i < REPS; i++) {
    const page = await signedInPage();
    await page.goto(`${origin}/healthz`, { waitUntil: 'load' });
    bare.push(await page.evaluate(() => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventEnd));
    await page.context().close();

    const fresh = await signedInPage();
    await fresh.goto(`${origin}/panel/`);
    cold.push((await marksOf(fresh, ['readyPainted'])).readyPainted!);
    coldBytes = await transferred(fresh);
    await fresh.reload();
    warm.push((await marksOf(fresh, ['readyPainted'])).readyPainted!);
    warmBytes = await transferred(fresh);
    await fresh.context().close();
  }
  console.log(`first load of the panel (overview), ${REPS} fresh profiles:`);
  console.log(`  bare navigation (/healthz)    ${ms(bare)}`);
  console.log(`  panel, cold cache             ${ms(cold)}  ${(median(cold) / median(bare)).toFixed(1)}x bare`);
  console.log(`  panel, reload (warm cache)    ${ms(warm)}  ${(median(warm) / median(bare)).toFixed(1)}x bare`);
  console.log(
    `  transferred cold: ${coldBytes.bytes} bytes in ${coldBytes.requests} requests (${coldBytes.decoded} bytes decoded); warm: ${warmBytes.bytes} bytes in ${warmBytes.requests} requests`,
  );

  // The Workspaces page with 500 rows: the panel's render after its data arrives, against plain DOM.
  const panelRender: number[] = [];
  const panelRenderPainted: number[] = [];
  const plainRender: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const page = await signedInPage(WORKSPACES);
    await page.goto(`${origin}/panel/workspaces`);
    const marks = await marksOf(page, ['rows', 'rowsPainted']);
    const arrived = await page.evaluate(
      () => (performance.getEntriesByType('resource') as PerformanceResourceTiming[]).find((entry) => entry.name.includes('/admin/workspaces?'))!.responseEnd,
    );
    panelRender.push(marks.rows! - arrived);
    panelRenderPainted.push(marks.rowsPainted! - arrived);
    const rows = await page.$$eval('table.workspaces tbody tr', (found) => found.length);
    if (rows !== WORKSPACES) throw new Error(`the workspaces page shows ${rows} rows, not ${WORKSPACES}`);
    plainRender.push(
      await page.evaluate(async () => {
        const response = await fetch('/admin/workspaces?sort=slug&order=asc&offset=0&limit=500');
        const text = await response.text();
        const started = performance.now();
        const { workspaces } = JSON.parse(text) as { workspaces: Record<string, unknown>[] };
        const table = document.createElement('table');
        table.className = 'workspaces';
        const body = table.createTBody();
        for (const row of workspaces) {
          const tr = body.insertRow();
          const box = document.createElement('input');
          box.type = 'checkbox';
          tr.insertCell().append(box);
          const th = document.createElement('th');
          th.textContent = String(row.slug);
          tr.append(th);
          for (const key of ['owner', 'desiredState', 'observedState', 'lastActivityAt', 'cpuPercent', 'memoryPercent', 'activeRun']) {
            tr.insertCell().textContent = String(row[key] ?? '—');
          }
          const actions = tr.insertCell();
          for (const label of ['Stop', 'Restart']) {
            const button = document.createElement('button');
            button.textContent = label;
            actions.append(button);
          }
        }
        document.querySelector('main')!.replaceChildren(table);
        await (globalThis as unknown as Painter).__nextPaint();
        return performance.now() - started;
      }),
    );
    await page.context().close();
  }
  console.log(`Workspaces page, ${WORKSPACES} rows, ${REPS} loads (from the API response's end):`);
  console.log(`  plain DOM, same JSON, painted ${ms(plainRender)}`);
  console.log(`  panel, rows in the document   ${ms(panelRender)}`);
  console.log(
    `  panel, rows painted           ${ms(panelRenderPainted)}  ${(median(panelRenderPainted) / median(plainRender)).toFixed(1)}x plain; target < 200 ms: ${Math.max(...panelRenderPainted) < 200 ? 'met (max)' : percentile(panelRenderPainted, 90) < 200 ? 'met (p90)' : 'NOT met'}`,
  );

  // The audit log, paged with "Load more".
  const sixMonthsAgo = new Date(Date.now() - 182 * DAY_MS).toISOString();
  const auditCases: [name: string, query: string, pages: number][] = [
    ['newest first', '', 20],
    ['six months back (until)', `until=${encodeURIComponent(sixMonthsAgo)}`, 20],
    ['actor ta0 (substring)', 'actor=ta0', 10],
    ['action user. (prefix)', 'action=user.', 10],
  ];
  console.log(`audit log, ${AUDIT_ROWS} entries, 50 a page: "Load more" clicked → rows painted, against the API's answer for the same page:`);
  let worst = 0;
  for (const [name, query, pages] of auditCases) {
    const page = await signedInPage();
    await page.goto(`${origin}/panel/audit${query ? `?${query}` : ''}`);
    await marksOf(page, ['readyPainted']);
    const endToEnd: number[] = [];
    const api: number[] = [];
    for (let p = 0; p < pages; p++) {
      const sample = await page.evaluate(async (filter) => {
        const rows = () => document.querySelectorAll('table.audit tbody tr');
        const last = rows()[rows().length - 1]!.getAttribute('data-id');
        const before = rows().length;
        const params = new URLSearchParams(filter);
        params.set('limit', '50');
        // The API alone, for the page the button is about to load (its cursor: the last id shown).
        const cursor = Number(last);
        if (Number.isFinite(cursor)) params.set('before', String(cursor));
        const apiStarted = performance.now();
        await (await fetch(`/admin/audit-log?${params.toString()}`)).json();
        const apiMs = performance.now() - apiStarted;
        const clicked = performance.now();
        await new Promise<void>((resolve) => {
          const observer = new MutationObserver(() => {
            if (rows().length < before + 50) return;
            observer.disconnect();
            void (globalThis as unknown as Painter).__nextPaint().then(resolve);
          });
          observer.observe(document.querySelector('main')!, { childList: true, subtree: true });
          (document.querySelector('button.more') as HTMLButtonElement).click();
        });
        return { endToEnd: performance.now() - clicked, api: apiMs };
      }, query);
      endToEnd.push(sample.endToEnd);
      api.push(sample.api);
    }
    worst = Math.max(worst, ...endToEnd);
    console.log(`  ${name.padEnd(26)} ${pages} pages  API ${ms(api)}`);
    console.log(`  ${''.padEnd(26)}           panel ${ms(endToEnd)}  ${(median(endToEnd) / median(api)).toFixed(1)}x API`);
    await page.context().close();
  }
  console.log(`  target "each page under 100 ms end to end": ${worst < 100 ? 'met' : 'NOT met'} (slowest ${worst.toFixed(1)} ms)`);
} finally {
  await browser?.close();
  plane.http?.server.closeAllConnections();
  await plane.stop();
  await drop();
}
process.exit(0);
