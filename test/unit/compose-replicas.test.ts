/**
 * Issue 23, compose.replicas.yaml beside compose.yaml: its second replica is compose.yaml's control
 * service written out (Debian's docker-compose cannot `extends` a service with depends_on), so that
 * it must not drift from it: the same image, user, socket, volumes and settings, but its own port,
 * on the loopback, trusting the balancer; the upgrade's third place (issue 44) is the second's
 * copy (YAML merge keys) on a port of its own. And the balancer's configuration is given every
 * variable it names. (test/integration/compose-replicas.test.ts brings the deployment up.)
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

const root = path.resolve(import.meta.dirname, '../..');

interface Service {
  image?: string;
  init?: boolean;
  restart?: string;
  group_add?: string[];
  network_mode?: string;
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: unknown;
  profiles?: string[];
}

// Merge keys (`<<`) as Compose reads them (YAML 1.1's).
const read = (file: string) => parse(readFileSync(path.join(root, file), 'utf8'), { merge: true }) as { services: Record<string, Service> };
const single = read('compose.yaml').services;
const replicas = read('compose.replicas.yaml').services;

/** What a replica is told differently from the single control plane: where it listens, and that a balancer is in front. */
const OWN = ['HOST', 'PORT', 'TRUST_PROXY'];

it("runs its second replica as compose.yaml's control service: the same image, user, socket, volumes and dependencies", () => {
  const { control } = single;
  const b = replicas['control-b']!;
  for (const key of ['image', 'init', 'restart', 'group_add', 'network_mode', 'volumes', 'depends_on'] as const)
    expect({ [key]: b[key] }).toEqual({ [key]: control![key] });
});

it('passes both replicas every setting that compose.yaml passes, as it does, and gives each its own port on the loopback behind the balancer', () => {
  const one = single.control!.environment!;
  const b = replicas['control-b']!.environment!;
  const a = replicas.control!.environment!;
  expect(Object.keys(b).toSorted()).toEqual(Object.keys(one).toSorted());
  for (const key of Object.keys(one).filter((name) => !OWN.includes(name))) expect({ [key]: b[key] }).toEqual({ [key]: one[key] });
  expect(Object.keys(a).toSorted()).toEqual([...OWN].toSorted());
  for (const env of [a, b]) expect({ HOST: env.HOST, TRUST_PROXY: env.TRUST_PROXY }).toEqual({ HOST: '127.0.0.1', TRUST_PROXY: 'true' });
  expect([a.PORT, b.PORT]).toEqual(['${CONTROL_A_PORT:-8081}', '${CONTROL_B_PORT:-8082}']);
});

it("runs the upgrade's third place as the second replica on its own port, only when named (its profile)", () => {
  const { 'control-b': b, 'control-c': c } = replicas;
  expect({ ...c, environment: undefined, profiles: undefined }).toEqual({ ...b, environment: undefined });
  expect(c!.environment).toEqual({ ...b!.environment, PORT: '${CONTROL_C_PORT:-8083}' });
  expect(c!.profiles).toEqual(['upgrade']);
  expect(b!.profiles).toBeUndefined();
});

it("gives the balancer every variable its configuration names, where compose.yaml's control plane listened", () => {
  const config = readFileSync(path.join(root, 'deploy/haproxy.cfg'), 'utf8');
  // `${NAME}`, and `${NAME-default}` for those with a default in the configuration itself.
  const named = new Set([...config.matchAll(/\$\{(\w+)(?:-[^}]*)?\}/g)].map((match) => match[1]!));
  const lb = replicas.lb!;
  expect(Object.keys(lb.environment!).toSorted()).toEqual([...named].toSorted());
  expect(lb.environment!.LB_HOST).toBe(single.control!.environment!.HOST);
  expect(lb.environment!.LB_PORT).toBe(single.control!.environment!.PORT);
  expect(lb.volumes).toEqual(['./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro']);
});
