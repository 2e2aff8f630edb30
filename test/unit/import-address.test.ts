/**
 * The import's address rules (src/import/address.ts) on addresses no test can reach: every kind of
 * address an import must not connect to is refused, IPv4-mapped and IPv6 forms included, unless
 * IMPORT_ALLOWED_ADDRESSES names its network; public addresses pass. IP addresses stand for
 * themselves (no DNS), so this needs no network.
 */
import { checkUrl, resolveChecked } from '../../src/import/address.ts';
import { AppError } from '../../src/errors.ts';

const REFUSED = [
  ['0.0.0.0', 'an unspecified address'],
  ['127.0.0.1', 'a loopback address'],
  ['127.8.9.10', 'a loopback address'],
  ['::1', 'a loopback address'],
  ['::ffff:127.0.0.1', 'a loopback address'],
  ['10.1.2.3', 'a private address'],
  ['172.16.0.1', 'a private address'],
  ['172.31.255.255', 'a private address'],
  ['192.168.1.1', 'a private address'],
  ['fd12:3456::1', 'a private address'],
  ['::ffff:10.0.0.1', 'a private address'],
  ['169.254.169.254', 'a link-local address'],
  ['fe80::1', 'a link-local address'],
  ['100.64.0.1', 'a shared (CGNAT) address'],
  ['224.0.0.251', 'a multicast address'],
  ['ff02::1', 'a multicast address'],
  ['255.255.255.255', 'a reserved address'],
  ['64:ff9b::a00:1', 'a reserved address'],
  ['2002:a00:1::1', 'a reserved address'],
  ['192.0.2.10', 'a reserved address'],
] as const;

/** The refusal of an import of a repository at `address` (its URL host), or undefined when it passes. */
async function refusalOf(address: string, allowedAddresses: string[] = []): Promise<AppError | undefined> {
  const host = address.includes(':') ? `[${address}]` : address;
  // As the URL writes it (an IPv4-mapped address in hexadecimal): the host is allowed, the address is what is checked.
  const rules = { allowedHosts: [new URL(`https://${host}/`).hostname.replace(/^\[|\]$/g, '')], allowedAddresses };
  try {
    await resolveChecked(checkUrl(`https://${host}/team/robot.git`, rules), rules);
    return undefined;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
}

it.each(REFUSED)('refuses %s, %s', async (address, kind) => {
  const refusal = await refusalOf(address);
  expect({ status: refusal?.status, code: refusal?.code }).toEqual({ status: 403, code: 'import_address_refused' });
  expect(refusal!.message).toContain(`, ${kind}:`);
});

it.each(['140.82.112.3', '2606:4700::6810:85e5', '172.32.0.1', '100.128.0.1', '11.0.0.1'])('lets the public address %s pass', async (address) => {
  expect(await refusalOf(address)).toBeUndefined();
});

it('lets the networks IMPORT_ALLOWED_ADDRESSES names pass, and only those', async () => {
  expect(await refusalOf('10.20.3.4', ['10.20.0.0/16'])).toBeUndefined();
  expect((await refusalOf('10.21.3.4', ['10.20.0.0/16']))?.code).toBe('import_address_refused');
  expect(await refusalOf('127.0.0.1', ['127.0.0.1'])).toBeUndefined();
  expect((await refusalOf('127.0.0.2', ['127.0.0.1']))?.code).toBe('import_address_refused');
});

it.each([
  ['http://github.com/team/robot', 'import_not_https'],
  ['git://github.com/team/robot', 'import_not_https'],
  ['ssh://git@github.com/team/robot', 'import_not_https'],
  ['file:///etc', 'import_not_https'],
  ['github.com/team/robot', 'import_url_invalid'],
  ['https://token@github.com/team/robot', 'import_url_invalid'],
  ['https://github.com/team/robot?x=1', 'import_url_invalid'],
  ['https://github.com/', 'import_url_invalid'],
  ['https://github.com.evil.org/team/robot', 'import_host_refused'],
  ['https://evil.org/github.com/team/robot', 'import_host_refused'],
])('refuses %s by its text (%s)', (url, code) => {
  expect(() => checkUrl(url, { allowedHosts: ['github.com', 'gitlab.com'], allowedAddresses: [] })).toThrow(expect.objectContaining({ code }));
});

it("gives git the repository's address without a trailing slash, its host in any case and its port", () => {
  const rules = { allowedHosts: ['github.com'], allowedAddresses: [] };
  expect(checkUrl('https://GitHub.com/Team/Robot.git/', rules)).toEqual({ url: 'https://github.com/Team/Robot.git', host: 'github.com', port: 443 });
  expect(checkUrl('https://github.com.:8443/team/robot', rules)).toEqual({ url: 'https://github.com.:8443/team/robot', host: 'github.com', port: 8443 });
});
