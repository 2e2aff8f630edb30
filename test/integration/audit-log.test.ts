import { writeAudit, type AuditAction } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import type { AuditPage as Page } from '../../src/wire/schemas.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

const db = useTestDatabase();
let app: TestApp;

beforeEach(async () => {
  app = await startApp(db.dataSource, { ADMIN_TOKEN });
});
afterEach(async () => {
  await app.close();
});

/** One row to seed; the action may be any text, so that tests can store what the store never writes. */
interface SeedRow {
  action?: string;
  email?: string;
  at?: string;
}

/** Inserts rows in order (so ids ascend with the array), filling in an ordinary entry. */
async function seed(rows: SeedRow[]): Promise<void> {
  for (const [index, row] of rows.entries()) {
    await db.dataSource.query('INSERT INTO audit_log (timestamp, actor_id, actor_email, action, target_kind, target_id) VALUES ($1, NULL, $2, $3, $4, $5)', [
      row.at ?? new Date(Date.UTC(2026, 0, 1, 0, index)).toISOString(),
      row.email ?? 'admin-token',
      row.action ?? 'container.stop',
      'workspace',
      `ws-${index}`,
    ]);
  }
}

/** GET /admin/audit-log with `params`, as the admin; fails the test unless the answer is 200. */
async function list(params: Record<string, string | number> = {}): Promise<Page> {
  const query = new URLSearchParams(Object.entries(params).map(([key, value]): [string, string] => [key, String(value)]));
  const response = await fetch(`${app.url}/admin/audit-log?${query.toString()}`, { headers: admin });
  expect(response.status).toBe(200);
  return (await response.json()) as Page;
}

const ids = (page: Page) => page.entries.map((entry) => entry.id);
const actions = (page: Page) => page.entries.map((entry) => entry.action);
const emails = (page: Page) => page.entries.map((entry) => entry.actor.email);
/** [from, from - 1, ..., to]. */
const descending = (from: number, to: number) => Array.from({ length: from - to + 1 }, (_, i) => from - i);

describe('GET /admin/audit-log', () => {
  it('lists the newest 50 entries first, in the documented shape, with a cursor to the next page', async () => {
    const names: AuditAction[] = ['user.promote', 'config.max-active-containers'];
    for (let i = 1; i <= 60; i++) {
      await writeAudit(db.dataSource, {
        actor: { id: `user-${i}`, email: `coach${i}@school.example` },
        action: names[i % 2]!,
        target: { kind: 'user', id: `target-${i}` },
        ...(i === 60 && { metadata: { from: 7, to: 12 } }),
      });
    }
    const page = await list();
    expect(ids(page)).toEqual(descending(60, 11));
    expect(page.nextCursor).toBe(11);
    const [newest] = page.entries;
    expect(newest).toEqual({
      id: 60,
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      actor: { id: 'user-60', email: 'coach60@school.example' },
      action: 'user.promote',
      target: { kind: 'user', id: 'target-60' },
      metadata: { from: 7, to: 12 },
    });
    expect(page.entries[1]!.metadata).toBeNull();
  });

  it('filters by a prefix of the action name', async () => {
    await seed([{ action: 'user.promote' }, { action: 'user.demote' }, { action: 'allowlist.add' }, { action: 'container.stop' }, { action: 'user.delete' }]);
    expect(actions(await list({ action: 'user.' }))).toEqual(['user.delete', 'user.demote', 'user.promote']);
    expect(actions(await list({ action: 'user.de' }))).toEqual(['user.delete', 'user.demote']);
    expect(actions(await list({ action: 'allowlist.add' }))).toEqual(['allowlist.add']);
    expect(actions(await list({ action: '.promote' }))).toEqual([]);
  });

  it('stores actor emails lower-case, so that the substring filter is case-insensitive', async () => {
    await writeAudit(db.dataSource, { actor: { id: null, email: 'Coach.Ada@School.Example' }, action: 'user.promote', target: { kind: 'user', id: 'u' } });
    expect(emails(await list({ actor: 'ADA@school' }))).toEqual(['coach.ada@school.example']);
    await expect(
      db.dataSource.query("INSERT INTO audit_log (actor_email, action, target_kind, target_id) VALUES ('Mixed@Case', 'user.promote', 'user', 'u')"),
    ).rejects.toThrow(/audit_log_actor_email_lower/);
  });

  it('filters by a case-insensitive substring of the actor email', async () => {
    await seed([{ email: 'ada.coach@school.example' }, { email: 'bob@school.example' }, { email: 'system' }, { email: 'ada@other.example' }]);
    expect(emails(await list({ actor: 'ADA' }))).toEqual(['ada@other.example', 'ada.coach@school.example']);
    expect(emails(await list({ actor: 'school.EXAMPLE' }))).toEqual(['bob@school.example', 'ada.coach@school.example']);
    expect(emails(await list({ actor: 'system' }))).toEqual(['system']);
  });

  it('matches %, _ and \\ in the filters literally', async () => {
    await seed([
      { email: 'a_b@x.example', action: 'user.promote' },
      { email: 'axb@x.example', action: 'user_promote' },
      { email: 'a%b@x.example', action: 'user%promote' },
      { email: 'a\\b@x.example', action: 'user\\promote' },
    ]);
    expect(emails(await list({ actor: 'a_b' }))).toEqual(['a_b@x.example']);
    expect(emails(await list({ actor: 'a%b' }))).toEqual(['a%b@x.example']);
    expect(emails(await list({ actor: 'a\\b' }))).toEqual(['a\\b@x.example']);
    expect(emails(await list({ actor: '%' }))).toEqual(['a%b@x.example']);
    expect(actions(await list({ action: 'user_' }))).toEqual(['user_promote']);
    expect(actions(await list({ action: 'user%' }))).toEqual(['user%promote']);
    expect(actions(await list({ action: 'user\\' }))).toEqual(['user\\promote']);
    expect(actions(await list({ action: '_' }))).toEqual([]);
  });

  it('combines filters, each narrowing the result', async () => {
    await seed([
      { email: 'ada@school.example', action: 'user.promote' },
      { email: 'bob@school.example', action: 'user.promote' },
      { email: 'ada@school.example', action: 'container.stop' },
      { email: 'ada@school.example', action: 'user.demote' },
    ]);
    expect(ids(await list({ action: 'user.', actor: 'ada' }))).toEqual([4, 1]);
    expect(ids(await list({ action: 'user.', actor: 'ada', before: 4 }))).toEqual([1]);
  });

  it('pages through every entry with the before cursor, without duplicates or gaps', async () => {
    await seed(Array.from({ length: 23 }, () => ({})));
    const seen: number[] = [];
    let cursor: number | null = null;
    let pages = 0;
    do {
      const page: Page = await list({ limit: 5, ...(cursor !== null && { before: cursor }) });
      seen.push(...ids(page));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(seen).toEqual(descending(23, 1));
    expect(pages).toBe(5);
  });

  it('pages through a filtered list with the cursor', async () => {
    await seed(Array.from({ length: 12 }, (_, i) => ({ action: i % 3 === 0 ? 'user.promote' : 'container.stop' })));
    const first = await list({ action: 'user.', limit: 2 });
    expect(ids(first)).toEqual([10, 7]);
    const second = await list({ action: 'user.', limit: 2, before: first.nextCursor! });
    expect(ids(second)).toEqual([4, 1]);
  });

  it('answers nextCursor null on the last page, and on a short one', async () => {
    await seed([{}, {}, {}]);
    const full = await list({ limit: 3 });
    expect(ids(full)).toEqual([3, 2, 1]);
    expect(full.nextCursor).toBe(1);
    expect(await list({ limit: 3, before: 1 })).toEqual({ entries: [], nextCursor: null });
    const short = await list({ limit: 5 });
    expect(ids(short)).toEqual([3, 2, 1]);
    expect(short.nextCursor).toBeNull();
    expect(await list({ action: 'nothing.' })).toEqual({ entries: [], nextCursor: null });
  });

  it('filters by time: since is inclusive, until exclusive, and offsets count', async () => {
    await seed(['2026-03-01T09:00:00Z', '2026-03-01T10:00:00Z', '2026-03-01T11:00:00Z', '2026-03-01T12:00:00Z'].map((at) => ({ at })));
    expect(ids(await list({ since: '2026-03-01T10:00:00Z' }))).toEqual([4, 3, 2]);
    expect(ids(await list({ until: '2026-03-01T11:00:00Z' }))).toEqual([2, 1]);
    expect(ids(await list({ since: '2026-03-01T10:00:00Z', until: '2026-03-01T12:00:00Z' }))).toEqual([3, 2]);
    expect(ids(await list({ since: '2026-03-01T10:30:00+01:00', until: '2026-03-01T13:00:00.000+02:00' }))).toEqual([2]);
    const [entry] = (await list({ since: '2026-03-01T12:00:00Z' })).entries;
    expect(entry!.timestamp).toBe('2026-03-01T12:00:00.000Z');
  });

  it('filters by a time range far in the past, including an entry written out of time order', async () => {
    const at = [
      '2026-01-01T00:00:00Z',
      '2026-01-10T00:00:00Z',
      '2026-01-10T12:00:00Z',
      '2026-01-10T06:00:00Z',
      '2026-01-20T00:00:00Z',
      '2026-02-01T00:00:00Z',
      '2026-03-01T00:00:00Z',
    ];
    await seed(at.map((timestamp) => ({ at: timestamp })));
    expect(ids(await list({ since: '2026-01-10T00:00:00Z', until: '2026-01-10T12:00:00Z' }))).toEqual([4, 2]);
    expect(ids(await list({ since: '2026-01-10T06:00:00Z', until: '2026-01-20T00:00:00Z' }))).toEqual([4, 3]);
    expect(ids(await list({ since: '2026-01-10T00:00:00Z', until: '2026-02-01T00:00:00Z', limit: 2 }))).toEqual([5, 4]);
    expect(ids(await list({ since: '2026-01-10T00:00:00Z', until: '2026-02-01T00:00:00Z', limit: 2, before: 4 }))).toEqual([3, 2]);
    expect(ids(await list({ until: '2026-01-05T00:00:00Z' }))).toEqual([1]);
    expect(ids(await list({ since: '2026-02-15T00:00:00Z' }))).toEqual([7]);
  });

  it.each([
    ['limit 0', 'limit=0', 'The parameter "limit" must be >= 1.'],
    ['limit 501', 'limit=501', 'The parameter "limit" must be <= 500.'],
    ['a limit that is not a number', 'limit=abc', 'The parameter "limit" must be a whole number written in digits, such as 50.'],
    ['a fractional limit', 'limit=2.5', 'The parameter "limit" must be a whole number written in digits, such as 50.'],
    ['a repeated limit', 'limit=1&limit=2', 'The parameter "limit" must be integer.'],
    ['a negative cursor', 'before=-1', 'The parameter "before" must be >= 1.'],
    ['an empty cursor', 'before=', 'The parameter "before" must be a whole number written in digits, such as 50.'],
    ['a cursor beyond 2^53', 'before=9007199254740993', 'The parameter "before" must be <= 9007199254740991.'],
    ['a since that is not a date', 'since=not-a-date', 'The parameter "since" must be an ISO 8601 date-time with a time zone, such as 2026-03-04T05:06:07Z.'],
    [
      'an until without a time zone',
      'until=2026-03-01T10:00:00',
      'The parameter "until" must be an ISO 8601 date-time with a time zone, such as 2026-03-04T05:06:07Z.',
    ],
    ['a leap second', 'since=2016-12-31T23:59:60Z', 'The parameter "since" must be an ISO 8601 date-time with a time zone, such as 2026-03-04T05:06:07Z.'],
    ['an overlong actor', `actor=${'a'.repeat(201)}`, 'The parameter "actor" must NOT have more than 200 characters.'],
    ['an unknown parameter', 'limit=5&sort=asc', 'The parameter "sort" is not allowed.'],
  ])('refuses %s with 400 naming the parameter', async (_name, query, message) => {
    const response = await fetch(`${app.url}/admin/audit-log?${query}`, { headers: admin });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: { code: 'validation_error', message } });
  });

  it('refuses a request without the admin token with 401', async () => {
    await seed([{}]);
    const response = await fetch(`${app.url}/admin/audit-log`);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('authentication_required');
  });
});
