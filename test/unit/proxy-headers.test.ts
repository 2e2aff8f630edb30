/**
 * What crosses the proxy, both ways (api/proxy/headers.ts), and how the session cookie is split
 * from the others (api/proxy/admission.ts), on raw header lists as Node and undici give them. The
 * same rules run end to end against a real editor container in test/integration/proxy.test.ts.
 */
import type http from 'node:http';
import { sessionCookies } from '../../api/proxy/admission.ts';
import { parseResponseHead, responseHeaders, upstreamHeaders, type ForwardingContext } from '../../api/proxy/headers.ts';

const forwarding: ForwardingContext = { trustProxy: false, proto: 'https', publicHost: 'cp.school.test' };

/** The parts of an incoming request the header rule reads. */
function request(raw: string[], remoteAddress = '10.0.0.7'): http.IncomingMessage {
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) headers[raw[i]!.toLowerCase()] ??= raw[i + 1]!;
  return { rawHeaders: raw, headers, socket: { remoteAddress } } as unknown as http.IncomingMessage;
}

/** A flat name/value list as an object of lower-case names (last value wins), for assertions. */
const asObject = (list: string[]) => Object.fromEntries(list.flatMap((_, i) => (i % 2 === 0 ? [[list[i]!.toLowerCase(), list[i + 1]!]] : [])));

describe('upstreamHeaders', () => {
  it('drops credentials, hop-by-hop headers and those Connection names, and sets X-Forwarded-*', () => {
    // prettier-ignore
    const req = request([
      'Host', 'cp.school.test',
      'Authorization', 'Bearer secret',
      'Connection', 'keep-alive, X-Private',
      'X-Private', 'hop',
      'Keep-Alive', 'timeout=5',
      'Expect', '100-continue',
      'X-Forwarded-For', '6.6.6.6',
      'X-Forwarded-Host', 'evil.test',
      'Accept', 'text/html',
    ]);
    const headers = upstreamHeaders(req, 'ada', 'theme=dark', forwarding);
    expect(asObject(headers)).toEqual({
      host: 'cp.school.test',
      accept: 'text/html',
      cookie: 'theme=dark',
      'x-forwarded-for': '10.0.0.7',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'cp.school.test',
      'x-forwarded-prefix': '/u/ada',
    });
  });

  it('keeps only Connection and Upgrade of the hop-by-hop headers for a WebSocket upgrade', () => {
    // prettier-ignore
    const req = request([
      'Host', 'cp.school.test',
      'Connection', 'Upgrade, X-Private',
      'Upgrade', 'websocket',
      'X-Private', 'hop',
      'Proxy-Authorization', 'Basic c2VjcmV0',
      'Keep-Alive', 'timeout=5',
      'TE', 'trailers',
      'Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ==',
    ]);
    const headers = asObject(upstreamHeaders(req, 'ada', undefined, forwarding, true));
    expect(Object.keys(headers).filter((name) => !name.startsWith('x-forwarded-'))).toEqual(['host', 'connection', 'upgrade', 'sec-websocket-key']);
  });

  it('keeps one Host and one Content-Length, in the order they came', () => {
    const headers = upstreamHeaders(request(['Host', 'a.test', 'Content-Length', '3', 'Host', 'b.test', 'Content-Length', '4']), 'ada', undefined, forwarding);
    expect(headers.slice(0, 4)).toEqual(['Host', 'a.test', 'Content-Length', '3']);
    expect(headers.filter((_, i) => i % 2 === 0 && headers[i]!.toLowerCase() === 'host')).toHaveLength(1);
  });

  it('extends a client X-Forwarded-For only behind a trusted proxy', () => {
    const req = request(['X-Forwarded-For', '1.2.3.4'], '10.0.0.1');
    expect(asObject(upstreamHeaders(req, 'ada', undefined, { ...forwarding, trustProxy: true }))['x-forwarded-for']).toBe('1.2.3.4, 10.0.0.1');
    expect(asObject(upstreamHeaders(req, 'ada', undefined, forwarding))['x-forwarded-for']).toBe('10.0.0.1');
  });

  it("drops a client's Forwarded, X-Real-IP and every X-Forwarded-* of its own", () => {
    // prettier-ignore
    const req = request([
      'Forwarded', 'for=6.6.6.6;host=evil.test',
      'X-Real-IP', '6.6.6.6',
      'X-Forwarded-Port', '1',
      'X-Forwarded-Server', 'evil.test',
      'Accept', '*/*',
    ]);
    expect(asObject(upstreamHeaders(req, 'ada', undefined, forwarding))).toEqual({
      accept: '*/*',
      'x-forwarded-for': '10.0.0.7',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'cp.school.test',
      'x-forwarded-prefix': '/u/ada',
    });
  });

  it('keeps Connection and Upgrade for a WebSocket upgrade', () => {
    const headers = asObject(
      upstreamHeaders(request(['Connection', 'Upgrade', 'Upgrade', 'websocket', 'Authorization', 'x']), 'ada', undefined, forwarding, true),
    );
    expect(headers).toMatchObject({ connection: 'Upgrade', upgrade: 'websocket' });
    expect(headers.authorization).toBeUndefined();
  });
});

describe('responseHeaders', () => {
  const raw = (list: string[]) => list.map((text) => Buffer.from(text, 'latin1'));

  it("drops hop-by-hop headers, those the editor's Connection names (even before it), and a Set-Cookie for our session", () => {
    const headers = responseHeaders(
      // prettier-ignore
      raw([
        'X-Secret', 'hop',
        'Connection', 'close, X-Secret',
        'Transfer-Encoding', 'chunked',
        'Set-Cookie', 'cp_session=stolen; Path=/',
        'Set-Cookie', ' cp_session.sig=forged',
        'Set-Cookie', 'theme=dark',
        'Content-Type', 'text/html',
      ]),
      ['cp_session', 'cp_session.sig'],
    );
    expect(headers).toEqual(['Set-Cookie', 'theme=dark', 'Content-Type', 'text/html']);
  });

  it.each([
    ['a space before =', 'cp_session =stolen; Path=/'],
    ['a tab before =', 'cp_session\t=stolen'],
    ['spaces around the name', '  cp_session  = stolen'],
    ['the signature with a space before =', 'cp_session.sig =forged'],
    ['another case', 'CP_Session=stolen'],
    ['the signature in capitals', 'CP_SESSION.SIG=forged'],
    ['no = at all (a nameless cookie)', 'cp_session'],
  ])('drops a Set-Cookie for our session cookie with %s, and keeps cookies whose names merely contain ours', (_kind, cookie) => {
    const kept = ['cp_session_theme=dark', 'x_cp_session=1', 'cp_sessions=2'];
    const headers = responseHeaders(raw([cookie, ...kept].flatMap((line) => ['Set-Cookie', line])), ['cp_session', 'cp_session.sig']);
    expect(headers).toEqual(kept.flatMap((line) => ['Set-Cookie', line]));
  });

  it('drops Clear-Site-Data, which could wipe our cookies', () => {
    expect(responseHeaders(raw(['Clear-Site-Data', '"cookies"', 'clear-site-data', '"*"', 'X-Kept', 'yes']), ['cp_session'])).toEqual(['X-Kept', 'yes']);
  });

  it.each([
    ['/', false],
    ['/u/', false],
    ['/u/bob/', false],
    ['/u/ada/../../', false],
    ['/u/ada/%2e%2e/%2e%2e/', false],
    ['//evil.example/u/ada/', false],
    ['./', false],
    ['/u/ada/', true],
    [' /u/ada/static/ ', true],
  ])('path mode: passes Service-Worker-Allowed %j as it is only within the workspace (%s), else narrowed to the workspace', (value, kept) => {
    const headers = responseHeaders(raw(['Service-Worker-Allowed', value, 'X-Kept', 'yes']), ['cp_session'], false, false, '/u/ada/');
    expect(headers).toEqual(['Service-Worker-Allowed', kept ? value : '/u/ada/', 'X-Kept', 'yes']);
  });

  it("keeps Connection and Upgrade of a WebSocket's 101, and filters the rest alike", () => {
    // prettier-ignore
    const headers = responseHeaders(
      raw([
        'Upgrade', 'websocket',
        'Connection', 'Upgrade',
        'Sec-WebSocket-Accept', 'abc=',
        'Keep-Alive', 'timeout=5',
        'Set-Cookie', 'cp_session =stolen',
        'Clear-Site-Data', '"cookies"',
      ]),
      ['cp_session', 'cp_session.sig'],
      true,
    );
    expect(headers).toEqual(['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Accept', 'abc=']);
  });

  it('keeps bytes as they came (latin1)', () => {
    expect(responseHeaders([Buffer.from('X-Name'), Buffer.from([0xe9])], [])).toEqual(['X-Name', 'é']);
  });
});

describe('parseResponseHead', () => {
  it('reads the status and the raw headers of a response head', () => {
    expect(parseResponseHead('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSet-Cookie:  a=b \r\nX-Empty:')).toEqual({
      status: 101,
      headers: ['Upgrade', 'websocket', 'Set-Cookie', 'a=b', 'X-Empty', ''],
    });
  });

  it.each([
    ['no status line', 'Upgrade: websocket'],
    ['another protocol', 'HTTP/2 101 Switching Protocols'],
    ['a status out of range', 'HTTP/1.1 099 Odd'],
    ['a line without a colon', 'HTTP/1.1 101 OK\r\nUpgrade websocket'],
    ['a folded line', 'HTTP/1.1 101 OK\r\nX-A: 1\r\n  continued'],
    ['a space in a name', 'HTTP/1.1 101 OK\r\nSet Cookie: a=b'],
    ['a bare carriage return in a value', 'HTTP/1.1 101 OK\r\nX-A: 1\rSet-Cookie: cp_session=x'],
    ['a NUL in a value', 'HTTP/1.1 101 OK\r\nX-A: 1\u0000'],
  ])('refuses a head with %s', (_kind, head) => {
    expect(parseResponseHead(head)).toBeUndefined();
  });
});

describe('sessionCookies', () => {
  const names = ['cp_session', 'cp_session.sig'];

  it('splits the session cookie and its signature from the others in one pass, the first of each winning', () => {
    expect(sessionCookies('theme=dark; cp_session=abc; cp_session.sig=sig; cp_session=second; lang=en', names)).toEqual({
      id: 'abc',
      signature: 'sig',
      others: 'theme=dark; lang=en',
    });
  });

  it('finds nothing in an empty or missing header', () => {
    expect(sessionCookies(undefined, names)).toEqual({ id: undefined, signature: undefined, others: undefined });
    expect(sessionCookies(' ; ;', names)).toEqual({ id: undefined, signature: undefined, others: undefined });
  });
});
