/**
 * The first request of a git clone over https (the smart protocol's discovery), made by the control
 * plane itself before git runs: it follows the server's redirects one by one, checking each target
 * as the address itself was checked, and makes sure a git repository answers at the end, so that
 * git is given an address that needs no redirect (and follows none).
 */
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { AppError, NotFoundError, ValidationError } from '../errors.ts';
import { checkUrl, resolveChecked, type AddressRules, type CheckedUrl } from './address.ts';

/** The most redirects followed, as browsers and curl bound them (git follows up to 20). */
const MAX_REDIRECTS = 5;

/** What the discovery request asks, as git asks it. */
const SERVICE = '/info/refs?service=git-upload-pack';

/** A lookup that answers only the addresses already checked: the connection goes where the check looked (DNS asked once). */
export function pinnedLookup(addresses: readonly string[]): LookupFunction {
  return (_hostname, options, callback) => {
    const found = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    if (options.all) return (callback as (error: null, addresses: { address: string; family: number }[]) => void)(null, found);
    callback(null, found[0]!.address, found[0]!.family);
  };
}

/** One GET of `url` at the checked addresses: its status, location and content type; the body is not read. */
function head(url: string, checked: CheckedUrl, ca: Buffer | undefined, signal: AbortSignal): Promise<{ status: number; location?: string; type?: string }> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      url,
      {
        agent: false,
        lookup: pinnedLookup(checked.addresses),
        ...(ca ? { ca } : {}),
        signal,
        // As git asks: the smart protocol, version 2 (a short answer: capabilities, no list of refs).
        headers: { 'user-agent': 'git/2 (classroom import)', 'git-protocol': 'version=2', accept: '*/*', 'accept-encoding': 'identity' },
      },
      (response) => {
        resolve({ status: response.statusCode ?? 0, location: response.headers.location, type: response.headers['content-type'] });
        response.destroy();
      },
    );
    request.on('error', reject);
  });
}

/**
 * Finds where the repository at `start` (a checked address) answers: follows up to MAX_REDIRECTS
 * redirects, each target checked by checkUrl and resolveChecked ("It redirects to ..."), and needs
 * the smart protocol's answer at the end (what GitHub, GitLab and `git http-backend` give; a web
 * page is no repository). Answers the address to give git. Throws the checks' errors, 400
 * `import_redirect_invalid` (a redirect git could not follow either), `import_not_git`, 404
 * `import_repository_not_found` (none, or not public: 401, 403, 404), 502 `import_unreachable`.
 * Aborting `signal` (the import's time limit) aborts the request in flight.
 */
export async function discover(start: CheckedUrl, rules: AddressRules, ca: Buffer | undefined, signal: AbortSignal): Promise<CheckedUrl> {
  let checked = start;
  for (let hops = 0; ; hops++) {
    let answer: Awaited<ReturnType<typeof head>>;
    try {
      answer = await head(`${checked.url}${SERVICE}`, checked, ca, signal);
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw new AppError('import_unreachable', `${checked.host} could not be reached (${(error as Error).message}).`);
    }
    if (answer.status >= 300 && answer.status < 400 && answer.location) {
      if (hops === MAX_REDIRECTS) throw ValidationError('import_redirect_invalid', `${start.url} redirects more than ${MAX_REDIRECTS} times.`);
      const target = new URL(answer.location, `${checked.url}${SERVICE}`).href;
      // As git takes a redirect: the new address is the target without what was asked.
      if (!target.endsWith(SERVICE))
        throw ValidationError('import_redirect_invalid', `${checked.url} redirects to ${target}, which is not a git repository's address.`);
      const what = `It redirects to ${target.slice(0, -SERVICE.length)}, which`;
      checked = await resolveChecked(checkUrl(target.slice(0, -SERVICE.length), rules, what), rules, what);
      continue;
    }
    if (answer.status === 200 && answer.type === 'application/x-git-upload-pack-advertisement') return checked;
    if (answer.status === 200)
      throw ValidationError('import_not_git', `${checked.url} is not a git repository (the server answered a web page); give the repository's address.`);
    if (answer.status === 401 || answer.status === 403 || answer.status === 404) {
      throw NotFoundError('import_repository_not_found', `There is no public repository at ${checked.url} (a private repository cannot be imported).`);
    }
    throw new AppError('import_unreachable', `${checked.host} answered ${answer.status} for ${checked.url}.`);
  }
}
