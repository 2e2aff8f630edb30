/**
 * The link-local firewall's rules as text (what the warning tells an operator to run) and what
 * writing them comes to where the control plane cannot (no iptables); the rules written on a real
 * host are tested in test/integration/security-metadata.test.ts.
 */
import { blockLinkLocal, linkLocalCommands } from '../../src/docker/firewall.ts';

it('names every step as a shell line that changes only what is missing, subnets last', () => {
  expect(linkLocalCommands(['172.18.0.0/16'])).toEqual([
    'iptables -S CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -N CLASSROOM-LINK-LOCAL',
    'iptables -S DOCKER-USER 2>/dev/null || iptables -N DOCKER-USER',
    'iptables -C DOCKER-USER -j CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -I DOCKER-USER 1 -j CLASSROOM-LINK-LOCAL',
    'iptables -C INPUT -j CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -I INPUT 1 -j CLASSROOM-LINK-LOCAL',
    'iptables -C CLASSROOM-LINK-LOCAL -s 172.18.0.0/16 -d 169.254.0.0/16 -j REJECT 2>/dev/null || iptables -A CLASSROOM-LINK-LOCAL -s 172.18.0.0/16 -d 169.254.0.0/16 -j REJECT',
  ]);
});

it('says why it could not write the rules, and what to run instead, when iptables is missing', async () => {
  expect(await blockLinkLocal(['10.9.0.0/24'], '/nonexistent/iptables')).toEqual({
    applied: false,
    reason: '/nonexistent/iptables is not installed here',
    commands: linkLocalCommands(['10.9.0.0/24']),
  });
});
