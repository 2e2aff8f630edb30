/**
 * Issue 23, the operator's monitoring as shipped in monitoring/: the alerting rules pass promtool's
 * own tests (each alert fires on trouble and stays quiet when healthy); the scrape config, with only
 * its targets and token file filled in, makes a real Prometheus (Debian's, installed by
 * scripts/provision.sh) scrape a real running control plane; every rule evaluates there without
 * error and none fires on this healthy one; and every query of the Grafana dashboard returns series
 * from it (a workspace runs, so the per-workspace panels have data too).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { names } from '../../src/docker/runtime.ts';
import { createHarness, eventually, inspectByName, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { freePort, startServer, type ServerProcess } from '../helpers/server.ts';
import { sessionFor } from '../helpers/session.ts';
import type { DataSource } from 'typeorm';

const MONITORING = path.join(import.meta.dirname, '../../monitoring');
const METRICS_TOKEN = 'monitoring-test-metrics-token-0123456789abcdef';
const SESSION_SECRET = 'monitoring-test-session-secret-0123456789';
const controlPlaneId = newControlPlaneId();
let db: { url: string; dataSource: DataSource };
let server: ServerProcess | undefined;
let prometheus: ChildProcess | undefined;
let prometheusUrl: string;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  prometheus?.kill('SIGKILL');
  await server?.stop('SIGKILL');
  await removeEverything(controlPlaneId);
  await db.dataSource.destroy();
});

/** Runs promtool; its output and exit status. */
function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { cwd: MONITORING, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

it('has alerting rules that promtool checks, and that pass their unit tests', () => {
  const checked = promtool('check', 'rules', 'alerts.yaml');
  expect(checked).toEqual({ status: 0, output: expect.stringContaining('SUCCESS: 8 rules found') });
  const tested = promtool('test', 'rules', 'alerts.test.yaml');
  expect(tested).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
});

it('scrapes a running control plane with the shipped config; every rule evaluates and stays quiet, and every dashboard query returns series', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-monitoring-'));
  writeFileSync(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
  server = await startServer({
    DATABASE_URL: db.url,
    WORKSPACE_IMAGE: TEST_IMAGE,
    CODE_MEMORY_LIMIT: '64m',
    CONTROL_PLANE_ID: controlPlaneId,
    SESSION_SECRET,
    METRICS_TOKEN,
    DATA_DIR: dataDir,
  });
  // A running workspace, and a request through the proxy to its editor.
  const { store } = createHarness(db.dataSource, { controlPlaneId });
  const { user, workspace } = await store.users.create({ email: `ada-${controlPlaneId}@school.test` });
  await store.workspaces.open(workspace.id);
  await eventually('the workspace running', async () => (await inspectByName(names.code(workspace.slug)))?.State.Running === true, 30_000);
  const { cookie } = await sessionFor(store.sessions, user.id, SESSION_SECRET);
  await eventually('the editor through the proxy', async () => (await fetch(`${server!.url}/u/${workspace.slug}/healthz`, { headers: { cookie } })).ok, 30_000);

  // The shipped config with only its targets, token file and rule file's place filled in (and a short interval).
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cp-prometheus-'));
  writeFileSync(path.join(dir, 'token'), METRICS_TOKEN);
  const config = parse(readFileSync(path.join(MONITORING, 'prometheus.yml'), 'utf8')) as {
    global: Record<string, string>;
    rule_files: string[];
    scrape_configs: { job_name: string; authorization: { credentials_file: string }; static_configs: { targets: string[] }[] }[];
  };
  config.global.scrape_interval = '1s';
  config.global.evaluation_interval = '1s';
  config.rule_files = config.rule_files.map((file) => path.join(MONITORING, file));
  const [job] = config.scrape_configs;
  job!.authorization.credentials_file = path.join(dir, 'token');
  job!.static_configs = [{ targets: [new URL(server.url).host] }];
  writeFileSync(path.join(dir, 'prometheus.yml'), stringify(config));
  expect(promtool('check', 'config', path.join(dir, 'prometheus.yml')).status).toBe(0);

  const port = await freePort();
  prometheusUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn(
    'prometheus',
    [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: 'ignore' },
  );
  await eventually(
    'Prometheus to scrape the control plane',
    async () => {
      const { data } = (await api('/api/v1/targets')) as { data: { activeTargets: { health: string; labels: { job: string } }[] } };
      return data.activeTargets.some((target) => target.labels.job === 'classroom-control-plane' && target.health === 'up');
    },
    60_000,
  );

  // Every rule loaded and evaluated without error; on a healthy control plane none fires (an
  // evaluation before the first scrape saw no leader: the next ones, with the scrape, clear it).
  let last: unknown;
  const rules = await eventually(
    'the rules evaluated, none pending or firing',
    async () => {
      const { data } = (await api('/api/v1/rules')) as { data: { groups: { rules: { name: string; health: string; lastError?: string; state: string }[] }[] } };
      const all = data.groups.flatMap((group) => group.rules);
      last = all.filter((rule) => rule.health !== 'ok' || rule.state !== 'inactive');
      return all.length > 0 && all.every((rule) => rule.health === 'ok' && rule.state === 'inactive') ? all : undefined;
    },
    30_000,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}: ${JSON.stringify(last)}`);
  });
  expect(rules.map((rule) => rule.name).toSorted()).toEqual([
    'ControlPlaneAtCapacity',
    'ControlPlaneBackupsFailing',
    'ControlPlaneDatabaseUnreachable',
    'ControlPlaneIdleSweepStalled',
    'ControlPlaneLeaseFlapping',
    'ControlPlaneNoLeader',
    'ControlPlaneReconcileErrors',
    'ControlPlaneReplicaDown',
  ]);

  // Every query of every dashboard panel returns series (the stats sampler needs two passes for CPU: up to 30 s).
  const dashboard = JSON.parse(readFileSync(path.join(MONITORING, 'grafana-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[];
  };
  const queries = dashboard.panels.flatMap((panel) => panel.targets.map((target) => ({ panel: panel.title, expr: target.expr })));
  expect(queries.length).toBeGreaterThan(20);
  const empty = new Set(queries.map((query) => query.expr));
  await eventually(
    'every dashboard query to return series',
    async () => {
      for (const expr of [...empty]) {
        const { data } = (await api(`/api/v1/query?query=${encodeURIComponent(expr)}`)) as { data: { result: unknown[] } };
        if (data.result.length > 0) empty.delete(expr);
      }
      return empty.size === 0;
    },
    90_000,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; still empty: ${JSON.stringify(queries.filter((query) => empty.has(query.expr)))}`);
  });
}, 240_000);

/** A GET of Prometheus's HTTP API, as JSON; fails on an error answer. */
async function api(pathAndQuery: string): Promise<unknown> {
  const response = await fetch(`${prometheusUrl}${pathAndQuery}`);
  const body = (await response.json()) as { status: string; error?: string };
  if (body.status !== 'success') throw new Error(`${pathAndQuery}: ${body.error ?? response.status}`);
  return body;
}
