/**
 * The host's firewall for the workspace network on one engine: no workspace container reaches a
 * link-local address (169.254.0.0/16), forwarded beyond the host or delivered to the host itself.
 * A cloud's metadata service answers there (169.254.169.254) and hands out the machine's
 * credentials to whoever asks; Docker forwards a container's traffic to it like any other. Docker
 * has no setting for this, so the rules are iptables': a chain of their own (FIREWALL_CHAIN),
 * hooked into Docker's DOCKER-USER (what is forwarded) and into INPUT (the host's own addresses),
 * rejecting link-local destinations from the network's subnets. Each command is idempotent (checked
 * before it is added), so control planes on one host, and restarts, never undo each other's rules.
 *
 * The control plane writes them itself where it may (root on the host, as `npm start` and bin/server
 * run there); where it may not (its compose container runs as an ordinary user), the commands are
 * what the operator runs (the warning names them; docs/operations.md). On a swarm the nodes'
 * firewall does it (deploy/swarm-node-firewall.sh).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/** The link-local range (IPv4): cloud metadata services and the like. */
export const LINK_LOCAL = '169.254.0.0/16';

/** The chain that holds the rules. */
export const FIREWALL_CHAIN = 'CLASSROOM-LINK-LOCAL';

/** What writing the rules came to: done, or why not and what an operator runs instead. */
export type FirewallOutcome = { applied: true } | { applied: false; reason: string; commands: string[] };

/** One iptables step: a check (`-C`, `-S`) that, when it fails, is followed by its change. */
interface Step {
  check: string[];
  change: string[];
}

/** The steps that keep containers of `subnets` from link-local addresses, in order. */
export function linkLocalSteps(subnets: readonly string[]): Step[] {
  const hook = (chain: string): Step => ({ check: ['-C', chain, '-j', FIREWALL_CHAIN], change: ['-I', chain, '1', '-j', FIREWALL_CHAIN] });
  const reject = (subnet: string) => ['-s', subnet, '-d', LINK_LOCAL, '-j', 'REJECT'];
  return [
    { check: ['-S', FIREWALL_CHAIN], change: ['-N', FIREWALL_CHAIN] },
    // Docker makes DOCKER-USER and jumps to it first from FORWARD; made here too when it has not yet.
    { check: ['-S', 'DOCKER-USER'], change: ['-N', 'DOCKER-USER'] },
    hook('DOCKER-USER'),
    hook('INPUT'),
    ...subnets.map((subnet) => ({ check: ['-C', FIREWALL_CHAIN, ...reject(subnet)], change: ['-A', FIREWALL_CHAIN, ...reject(subnet)] })),
  ];
}

/** The steps as shell lines an operator can run as root (each change only when its check fails). */
export function linkLocalCommands(subnets: readonly string[]): string[] {
  return linkLocalSteps(subnets).map((step) => `iptables ${step.check.join(' ')} 2>/dev/null || iptables ${step.change.join(' ')}`);
}

const run = promisify(execFile);

/** Writes the rules for `subnets` with the host's iptables; says why not when it cannot (not root, no iptables). */
export async function blockLinkLocal(subnets: readonly string[], iptables = 'iptables'): Promise<FirewallOutcome> {
  if (subnets.length === 0) return { applied: false, reason: 'the workspace network has no IPv4 subnet to match', commands: [] };
  try {
    for (const step of linkLocalSteps(subnets)) {
      const present = await run(iptables, ['-w', ...step.check]).then(
        () => true,
        () => false,
      );
      if (!present) await run(iptables, ['-w', ...step.change]);
    }
    return { applied: true };
  } catch (error) {
    const { code, stderr } = error as NodeJS.ErrnoException & { stderr?: string };
    const reason = code === 'ENOENT' ? `${iptables} is not installed here` : (stderr?.trim().split('\n')[0] ?? (error as Error).message);
    return { applied: false, reason, commands: linkLocalCommands(subnets) };
  }
}
