/**
 * Issue 41, item 1, as the production guide deploys: every setting the control plane reads, written
 * in `.env` with a value other than its default, is seen by the server, in compose.yaml and in both
 * replicas of compose.replicas.yaml. Each control service is run as compose runs it (`compose run
 * --rm --no-deps`: the service's environment and the image's, nothing started beside it) with node
 * importing the image's own src/config.ts: its loadConfig parses the container's environment, then
 * the same without each variable in turn. A variable whose absence changes nothing was not seen:
 * compose dropped it, passed it under another name, or the server ignores it. The list is the
 * configuration module's (VARIABLES): a numeric or enumerated setting gets a value of its own here,
 * any other needs one in VALUES, or the first test fails naming it. Two `compose run`s per control
 * service (GitHub's sign-in, then Google's), 1 to 2 s each; about 12 s in all with the image's check
 * and the cleanup (test/unit/compose-settings.test.ts checks the files' text).
 */
import { randomBytes } from 'node:crypto';
import { VARIABLES } from '../../src/config.ts';
import { buildImages, deployment, type Deployment } from '../helpers/compose.ts';

/**
 * Settings `.env` does not give the server: the image's (NODE_ENV=production, DATA_DIR=/data, where
 * the deployment's volume is) and the database's URL, which compose.yaml makes from POSTGRES_PASSWORD
 * and DB_PORT. They are checked as they reach the server.
 */
const NOT_IN_DOTENV = ['NODE_ENV', 'DATA_DIR', 'DATABASE_URL'];

/** At most two sign-in providers at once: GitHub's pair is in the first `.env`, Google's in its place in the second. */
const GITHUB = { GITHUB_CLIENT_ID: 'Iv1.robots204', GITHUB_CLIENT_SECRET: randomBytes(20).toString('hex') };
const GOOGLE = { GOOGLE_CLIENT_ID: 'robots204.apps.googleusercontent.com', GOOGLE_CLIENT_SECRET: randomBytes(20).toString('hex') };

/** The values a schema cannot give (text, and what goes with other settings), each other than its default. */
const VALUES: Record<string, string> = {
  // Neither the server's default nor compose's (127.0.0.1), nor the image's (0.0.0.0).
  HOST: '::1',
  DATABASE_DIRECT_URL: 'postgres://control:direct@127.0.0.1:6432/control',
  SESSION_SECRET: randomBytes(32).toString('hex'),
  // The one value other than the server's default (human); upper case, so not compose's default text either.
  LOG_FORMAT: 'JSON',
  // Neither the server's default (debug) nor compose's (info).
  LOG_LEVEL: 'warning',
  NO_COLOR: '1',
  CODE_MEMORY_LIMIT: '3g',
  RUN_MEMORY_LIMIT: '1536m',
  SERVICE_ADMIN_EMAIL: 'head@school.test,ops@school.test',
  ADMIN_TOKEN: randomBytes(32).toString('hex'),
  METRICS_TOKEN: randomBytes(32).toString('hex'),
  // Nothing is started: the image, network and id are only parsed.
  WORKSPACE_IMAGE: 'registry.school.test/classroom-workspace:2025',
  WORKSPACE_NETWORK: 'room-204-workspaces',
  CONTROL_PLANE_ID: 'room-204',
  // https needs TRUST_PROXY=true, which is its schema's other value.
  PUBLIC_URL: 'https://robots.school.test',
  ...GITHUB,
  OIDC_ISSUER: 'https://login.school.test/realms/robots',
  OIDC_CLIENT_ID: 'robots',
  OIDC_CLIENT_SECRET: randomBytes(20).toString('hex'),
  OIDC_LABEL: 'School login',
  SIM_COMMAND: './gradlew simulateJava --offline',
  RUN_BUILD_TIMEOUT: '15m',
  WORKSPACE_HOST: '*.ws.school-workspaces.test:8443',
  // A leader gives up before another may take over, and tries more than once before it gives up.
  LEASE_DURATION_SECONDS: '20',
  LEASE_RENEW_DEADLINE_SECONDS: '12',
  LEASE_RETRY_SECONDS: '4',
  // Unset, a run's are the editor's: a value of their own.
  CODE_CPUS: '1.5',
  RUN_CPUS: '2',
  HOME_DISK_LIMIT: '8g',
  OUTPUT_STREAM_BUFFER: '256k',
  IMPORT_ALLOWED_HOSTS: 'github.com,git.school.test',
  IMPORT_ALLOWED_ADDRESSES: '10.20.0.0/16',
  IMPORT_MAX_SIZE: '200m',
  LESSON_MAX_SIZE: '300m',
  IMPORT_CA_FILE: '/etc/ssl/certs/school-ca.pem',
  // RUNTIME's other value is swarm, which needs its engines.
  SWARM_ENGINES: 'unix:///var/run/docker.sock,tcp://10.20.0.12:2375',
};

/** A value other than the default that the schema gives: an enumeration's first other, a number's default plus one (or its least). */
function generated(name: string): string | undefined {
  const { schema, default: fallback } = VARIABLES[name]!;
  if ('enum' in schema) return schema.enum.find((value) => value !== String(fallback));
  if (schema.type === 'string') return undefined;
  const least = schema.minimum ?? (schema.exclusiveMinimum ?? 0) + 1;
  if (typeof fallback !== 'number') return String(least);
  return String(fallback + 1 <= (schema.maximum ?? Infinity) ? fallback + 1 : least);
}

/** The server's settings that `.env` gives it (GitHub's sign-in; Google's pair is in the second `.env`). */
const FROM_DOTENV = Object.keys(VARIABLES).filter((name) => !NOT_IN_DOTENV.includes(name) && !(name in GOOGLE));

/** Their values: VALUES', else the schema's; one with neither is left out (and named by the first test). */
const SETTINGS: Record<string, string> = Object.fromEntries(
  FROM_DOTENV.flatMap((name) => {
    const value = VALUES[name] ?? generated(name);
    return value === undefined ? [] : [[name, value]];
  }),
);

/** The settings of compose.yaml's own (not the server's) that are checked through the server's: its database's port, the replicas' ports. */
const DEPLOYMENT = { DB_PORT: '6543', CONTROL_A_PORT: '9081', CONTROL_B_PORT: '9082', CONTROL_C_PORT: '9083' };

/**
 * Run by node in a control container: the image's loadConfig parses the container's environment,
 * then the same without each of its variables (a refusal is a parse too: its message).
 */
const PARSE = `
const { loadConfig, VARIABLES } = await import('/app/src/config.ts');
const parse = (env) => { try { return JSON.stringify(loadConfig(env)); } catch (error) { return 'refused: ' + error.message; } };
const names = Object.keys(VARIABLES);
console.log(JSON.stringify({
  env: Object.fromEntries(names.map((name) => [name, process.env[name] || null])),
  config: parse(process.env),
  without: Object.fromEntries(names.map((name) => [name, parse({ ...process.env, [name]: undefined })])),
}));`;

interface Parsed {
  env: Record<string, string | null>;
  config: string;
  without: Record<string, string>;
}

let single: Deployment;
let replicas: Deployment;

beforeAll(async () => {
  // Provisioning built it: a no-op check that it is this checkout's.
  await buildImages();
  single = await deployment(['compose.yaml'], { ...SETTINGS, ...DEPLOYMENT }, { dotEnv: true });
  replicas = await deployment(['compose.yaml', 'compose.replicas.yaml'], { ...SETTINGS, ...DEPLOYMENT }, { dotEnv: true });
}, 20 * 60_000);

afterAll(async () => {
  await Promise.all([single?.cleanup(), replicas?.cleanup()]);
}, 150_000);

/** What `service` parses with the deployment's `.env` holding its settings and `providers` (GitHub's or Google's pair). */
async function parsed(deployed: Deployment, service: string, providers: Record<string, string>): Promise<Parsed> {
  for (const name of [...Object.keys(GITHUB), ...Object.keys(GOOGLE)]) delete deployed.env[name];
  Object.assign(deployed.env, providers);
  const result = await deployed.compose(['run', '--rm', '--no-deps', '-T', service, 'node', '--input-type=module', '-e', PARSE], 120_000);
  if (result.code !== 0) throw new Error(`compose run ${service} exited ${result.code}:\n${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout) as Parsed;
}

it('has a value for every setting the server reads but those the deployment sets (one at its default is not seen, below)', () => {
  const missing = FROM_DOTENV.filter((name) => !(name in SETTINGS));
  expect({ 'settings without a value in VALUES': missing }).toEqual({ 'settings without a value in VALUES': [] });
});

describe.each([
  { file: 'compose.yaml', service: 'control', own: {} },
  // Each replica listens where the file says, on the loopback (HOST, the server's default), behind the balancer.
  { file: 'compose.replicas.yaml', service: 'control', own: { HOST: '127.0.0.1', PORT: DEPLOYMENT.CONTROL_A_PORT, TRUST_PROXY: 'true' } },
  { file: 'compose.replicas.yaml', service: 'control-b', own: { HOST: '127.0.0.1', PORT: DEPLOYMENT.CONTROL_B_PORT, TRUST_PROXY: 'true' } },
  // The upgrade's third place (issue 44): the second replica on its own port.
  { file: 'compose.replicas.yaml', service: 'control-c', own: { HOST: '127.0.0.1', PORT: DEPLOYMENT.CONTROL_C_PORT, TRUST_PROXY: 'true' } },
])('$file, $service', ({ file, service, own }) => {
  it.each([
    { providers: GITHUB, with: "GitHub's sign-in" },
    { providers: GOOGLE, with: "Google's sign-in" },
  ])('passes the server every setting of .env, each seen by its loadConfig ($with)', async ({ providers }) => {
    const deployed = file === 'compose.yaml' ? single : replicas;
    const { env, config, without } = await parsed(deployed, service, providers);
    const password = deployed.env.POSTGRES_PASSWORD!;
    const expected = {
      ...Object.fromEntries(Object.keys(VARIABLES).map((name) => [name, null])),
      ...Object.fromEntries(Object.keys(VARIABLES).flatMap((name) => (deployed.env[name] === undefined ? [] : [[name, deployed.env[name]]]))),
      NODE_ENV: 'production',
      DATA_DIR: '/data',
      DATABASE_URL: `postgres://control:${password}@127.0.0.1:${DEPLOYMENT.DB_PORT}/control`,
      ...own,
    };
    expect(env).toEqual(expected);
    expect(config).not.toMatch(/^refused/);
    // The replicas' HOST is the file's, the server's default: passed (above), but not told apart from its absence.
    const unseen = Object.keys(VARIABLES).filter((name) => env[name] !== null && without[name] === config && !(name === 'HOST' && 'HOST' in own));
    expect({ 'parsed the same without them': unseen }).toEqual({ 'parsed the same without them': [] });
  });
});
