/**
 * Where an import may go: an https:// address of an allowed host, whose every resolved address is
 * one the control plane may connect to (docs/security.md, "Importing a team's project").
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { parseCidr } from '../config.ts';
import { AppError, ValidationError } from '../errors.ts';
import type { CodeWithStatus } from '../error-codes.ts';

/**
 * The networks an import never connects to unless IMPORT_ALLOWED_ADDRESSES names them, by what
 * they are: what the control plane's own host, its LAN or its cloud answer on (loopback, private,
 * link-local with the metadata service, CGNAT), and what is no single public host.
 */
const SPECIAL: readonly { kind: string; networks: readonly string[] }[] = [
  { kind: 'an unspecified address', networks: ['0.0.0.0/8', '::/128'] },
  { kind: 'a loopback address', networks: ['127.0.0.0/8', '::1/128'] },
  { kind: 'a private address', networks: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'] },
  { kind: 'a link-local address', networks: ['169.254.0.0/16', 'fe80::/10'] },
  { kind: 'a shared (CGNAT) address', networks: ['100.64.0.0/10'] },
  { kind: 'a multicast address', networks: ['224.0.0.0/4', 'ff00::/8'] },
  {
    // IETF protocol assignments, benchmarking, documentation, the future-use block (with broadcast),
    // and IPv6 prefixes that carry an IPv4 address of their own (NAT64, 6to4, Teredo) or go nowhere.
    kind: 'a reserved address',
    networks: [
      '192.0.0.0/24',
      '192.0.2.0/24',
      '198.18.0.0/15',
      '198.51.100.0/24',
      '203.0.113.0/24',
      '240.0.0.0/4',
      '64:ff9b::/96',
      '64:ff9b:1::/48',
      '100::/64',
      '2001::/32',
      '2001:db8::/32',
      '2002::/16',
    ],
  },
];

/** A BlockList of CIDR networks (IPv4 rules also match IPv4-mapped IPv6 addresses). */
function blockListOf(networks: readonly string[]): BlockList {
  const list = new BlockList();
  for (const network of networks) {
    const parsed = parseCidr(network)!;
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return list;
}

const SPECIAL_LISTS = SPECIAL.map(({ kind, networks }) => ({ kind, list: blockListOf(networks) }));

/** An import's address, checked: the URL git is given (no trailing slash), its host and port, and the addresses it may connect to. */
export interface CheckedUrl {
  url: string;
  host: string;
  port: number;
  addresses: string[];
}

/** The rules of IMPORT_ALLOWED_HOSTS and IMPORT_ALLOWED_ADDRESSES. */
export interface AddressRules {
  allowedHosts: readonly string[];
  allowedAddresses: readonly string[];
}

/** 403 for an address the rules refuse (a host not allowed, an address not to be connected to). */
const refused = (code: CodeWithStatus<403>, message: string) => new AppError(code, message);

/**
 * Checks an import's address as the student gave it, before anything is looked up: a URL, https,
 * without a name or password, a query or a fragment, naming a repository (a path), of a host
 * IMPORT_ALLOWED_HOSTS allows. `what` names it in messages (`The address "<text>"`, or "It redirects to <url>, which").
 * Throws 400 `import_url_invalid` or `import_not_https`, 403 `import_host_refused`.
 */
export function checkUrl(text: string, rules: AddressRules, what = `The address ${JSON.stringify(text)}`): { url: string; host: string; port: number } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw ValidationError('import_url_invalid', `${what} is not a web address (https://github.com/<team>/<repository>).`);
  }
  if (url.protocol !== 'https:') {
    throw ValidationError('import_not_https', `${what} is not https://: only https:// addresses can be imported (not http://, git://, ssh:// or a file).`);
  }
  if (url.username || url.password) {
    throw ValidationError(
      'import_url_invalid',
      `${what} carries a name or password: only public repositories can be imported, by their plain https:// address.`,
    );
  }
  if (url.search || url.hash) throw ValidationError('import_url_invalid', `${what} has a query or a fragment (? or #): give the repository's plain address.`);
  const repository = url.pathname.replace(/\/+$/, '');
  if (repository === '') throw ValidationError('import_url_invalid', `${what} names no repository (https://${url.host}/<team>/<repository>).`);
  const host = url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (!rules.allowedHosts.includes(host)) {
    throw refused(
      'import_host_refused',
      `${what} is on ${host}, and projects can be imported from ${rules.allowedHosts.join(', ') || 'no host'} only (your coach's operator sets which: IMPORT_ALLOWED_HOSTS).`,
    );
  }
  return { url: `${url.origin}${repository}`, host, port: Number(url.port || 443) };
}

/**
 * Resolves a checked URL's host (an IP address stands for itself) and checks every address it has:
 * one that is loopback, private, link-local, CGNAT, multicast, unspecified or reserved is refused
 * unless IMPORT_ALLOWED_ADDRESSES names its network; a name with any refused address is refused
 * whole (a name that answers both is how DNS rebinding starts). Throws 400 `import_host_unknown`
 * when the name does not resolve, 403 `import_address_refused` naming the address and what it is.
 */
export async function resolveChecked(
  checked: { url: string; host: string; port: number },
  rules: AddressRules,
  what = `The address ${checked.url}`,
): Promise<CheckedUrl> {
  let addresses: string[];
  if (isIP(checked.host)) addresses = [checked.host];
  else {
    try {
      addresses = (await lookup(checked.host, { all: true, verbatim: true })).map((found) => found.address);
    } catch {
      throw ValidationError('import_host_unknown', `${what} names a host that could not be found (${checked.host}); check the address.`);
    }
  }
  const allowed = blockListOf(rules.allowedAddresses);
  for (const address of addresses) {
    const family = isIP(address) === 4 ? 'ipv4' : 'ipv6';
    if (allowed.check(address, family)) continue;
    const special = SPECIAL_LISTS.find(({ list }) => list.check(address, family));
    if (special) {
      const named = address === checked.host ? address : `${checked.host} (${address})`;
      throw refused(
        'import_address_refused',
        `${what} leads to ${named}, ${special.kind}: imports reach public servers only, never the school's own network or this server (IMPORT_ALLOWED_ADDRESSES allows a network).`,
      );
    }
  }
  return { ...checked, addresses };
}
