import { createHash, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { AppError, ConflictError, ValidationError } from '../errors.ts';
import { checkEmail } from '../identity/email.ts';
import type { Actor } from './audit.ts';
import type { Mutate, Tx } from './mutation.ts';
import { col, rowCodec } from './row-codec.ts';
import { USERS } from './users.ts';

/** How long the first-run setup link works (Jupyter's token URL does not expire; ours does, and only one is live). */
const SETUP_LINK_TTL_MS = 15 * 60_000;
/** How long a sign-in link works unless its maker says otherwise. */
export const SIGN_IN_LINK_TTL_MS = 60 * 60_000;
/** The longest a sign-in link may be made to work: a school day. */
export const MAX_SIGN_IN_LINK_TTL_MS = 24 * 60 * 60_000;

const LINK_PURPOSES = ['setup', 'sign-in'] as const;

/** What a link is for: the first-run setup, or signing in one person. */
export type LinkPurpose = (typeof LINK_PURPOSES)[number];

/** A link just made: its token appears here once and is stored only hashed. */
export interface NewLink {
  id: string;
  token: string;
  expiresAt: Date;
}

/** A link as someone opening it sees it (never its token). */
export interface LinkView {
  id: string;
  purpose: LinkPurpose;
  /** Whom a sign-in link signs in; null for the setup link. */
  email: string | null;
  expiresAt: Date;
}

/** Where a link's page is, under the control plane's public origin. */
export const linkPath = (purpose: LinkPurpose, token: string) => `/auth/${purpose === 'setup' ? 'setup' : 'link'}/${token}`;

/** A token as links carry it: 32 random bytes, base64url (43 characters). */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const hash = (token: string) => createHash('sha256').update(token).digest('hex');

/** 410 `link_not_valid`: the one answer for a link that is unknown, used, expired or of another kind (which of them is no one's business). */
const LinkNotValidError = () =>
  new AppError('link_not_valid', 'This link is not valid: it was already used, it expired, or it was copied incompletely. Ask for a new one.');

/** The sign_in_links table's columns the store reads (never the token's hash). */
const LINKS = rowCodec(
  'sign_in_links',
  { id: col.text, purpose: col.oneOf(LINK_PURPOSES), email: col.nullable(col.text), expires_at: col.timestamp },
  (row): LinkView => ({ id: row.id, purpose: row.purpose, email: row.email, expiresAt: row.expires_at }),
);
const MADE = LINKS.pick('id', 'expires_at');
const ADMINS = USERS.pick('id');

/** The live link with this token (unused, unexpired, of this purpose), locked when `tx` is a transaction; else undefined. */
async function liveLink(db: DataSource | Tx, token: string, purpose: LinkPurpose, lock: boolean): Promise<LinkView | undefined> {
  if (!TOKEN.test(token)) return undefined;
  return LINKS.first(
    db,
    `SELECT ${LINKS.columns} FROM sign_in_links
     WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > now()${lock ? ' FOR UPDATE' : ''}`,
    [hash(token), purpose],
  );
}

/** Whether any admin exists (the setup link's condition). */
async function adminExists(db: DataSource | Tx): Promise<boolean> {
  return (await ADMINS.all(db, "SELECT id FROM users WHERE role = 'admin' LIMIT 1")).length > 0;
}

/** Serialises setup links: minting and using them, against each other (a transaction-level advisory lock). */
const lockSetup = (tx: Tx) => tx.query("SELECT pg_advisory_xact_lock(hashtext('sign_in_links.setup'))");

/**
 * One-time links (the first-run setup link, operators' sign-in links): made with a random token
 * whose SHA-256 alone is stored, used at most once and only before they expire. Using one is a
 * transaction that marks it used, so two tabs opening the same link sign in once.
 */
export class SignInLinkStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;

  constructor(db: DataSource, mutate: Mutate) {
    this.db = db;
    this.mutate = mutate;
  }

  /**
   * Makes the first-run setup link while no admin exists (else undefined). Any earlier unused setup
   * link stops working: one is live at a time. Not audited (no one acted; the server prints it); its
   * use is, as `auth.setup`.
   */
  createSetup(): Promise<NewLink | undefined> {
    return this.mutate(async (tx) => {
      await lockSetup(tx);
      if (await adminExists(tx)) return { value: undefined, changed: [], audit: null };
      await tx.query("DELETE FROM sign_in_links WHERE purpose = 'setup' AND used_at IS NULL");
      const link = await insertLink(tx, 'setup', null, SETUP_LINK_TTL_MS, 'system');
      return { value: link, changed: [], audit: null };
    });
  }

  /**
   * Makes a sign-in link for `email` working for `ttlMs` (1 minute to 24 hours), and audits
   * `auth.sign-in-link` (target the link, the email and expiry in the metadata). Only for an email
   * that may sign in (`isAllowed`: the allowlist and SERVICE_ADMIN_EMAIL, as the caller knows them),
   * with or without an account yet (it is made at first use, as at a first sign-in): else 409
   * `not_allowlisted`; 400 for an invalid email or expiry. Links expired for a day are cleared on the way.
   */
  createSignIn(actor: Actor, email: string, options: { isAllowed: (email: string) => boolean; ttlMs?: number }): Promise<NewLink & { email: string }> {
    const ttlMs = options.ttlMs ?? SIGN_IN_LINK_TTL_MS;
    const checked = checkEmail(email);
    if ('problem' in checked) return Promise.reject(ValidationError('invalid_email', `Not a valid email: ${checked.problem}.`));
    if (!options.isAllowed(checked.value)) {
      return Promise.reject(ConflictError('not_allowlisted', `${checked.value} is not on the allowlist: add it (or its domain) first.`));
    }
    if (!Number.isInteger(ttlMs) || ttlMs < 60_000 || ttlMs > MAX_SIGN_IN_LINK_TTL_MS) {
      return Promise.reject(ValidationError('invalid_expiry', 'A sign-in link works for 1 to 1440 minutes.'));
    }
    return this.mutate(async (tx) => {
      await tx.query("DELETE FROM sign_in_links WHERE expires_at < now() - interval '1 day'");
      const link = await insertLink(tx, 'sign-in', checked.value, ttlMs, actor.email);
      return {
        value: { ...link, email: checked.value },
        changed: [],
        audit: {
          actor,
          action: 'auth.sign-in-link',
          target: { kind: 'sign-in-link', id: link.id },
          metadata: { email: checked.value, expiresAt: link.expiresAt.toISOString() },
        },
      };
    });
  }

  /** The live link of this purpose with this token, for the page that asks to use it; undefined when it is not valid (or no admin may be set up any more). */
  async peek(token: string, purpose: LinkPurpose): Promise<LinkView | undefined> {
    const link = await liveLink(this.db, token, purpose, false);
    if (link && purpose === 'setup' && (await adminExists(this.db))) return undefined;
    return link;
  }

  /**
   * Uses a sign-in link: marks it used and audits `auth.sign-in-link.use` with the email as the
   * actor, and returns the email to sign in. Throws LinkNotValidError when it is not valid.
   */
  useSignIn(token: string): Promise<string> {
    return this.mutate(async (tx) => {
      const link = await liveLink(tx, token, 'sign-in', true);
      if (!link) throw LinkNotValidError();
      await tx.query('UPDATE sign_in_links SET used_at = now() WHERE id = $1', [link.id]);
      return {
        value: link.email!,
        changed: [],
        audit: { actor: { id: null, email: link.email! }, action: 'auth.sign-in-link.use', target: { kind: 'sign-in-link', id: link.id } },
      };
    });
  }

  /**
   * Uses the setup link for `email` (who becomes the first admin; the caller makes the account):
   * marks it used and audits `auth.setup`. Throws LinkNotValidError when the link is not valid,
   * 409 `admin_exists` when an admin exists by now, 400 for an invalid email.
   */
  useSetup(token: string, input: { email: string; name: string }): Promise<string> {
    const checked = checkEmail(input.email);
    if ('problem' in checked) return Promise.reject(ValidationError('invalid_email', `Not a valid email: ${checked.problem}.`));
    return this.mutate(async (tx) => {
      await lockSetup(tx);
      const link = await liveLink(tx, token, 'setup', true);
      if (!link) throw LinkNotValidError();
      if (await adminExists(tx)) throw ConflictError('admin_exists', 'An admin exists already: sign in instead, and ask an admin for what you need.');
      await tx.query('UPDATE sign_in_links SET used_at = now() WHERE id = $1', [link.id]);
      return {
        value: checked.value,
        changed: [],
        audit: {
          actor: { id: null, email: checked.value },
          action: 'auth.setup',
          target: { kind: 'sign-in-link', id: link.id },
          metadata: { name: input.name },
        },
      };
    });
  }
}

async function insertLink(tx: Tx, purpose: LinkPurpose, email: string | null, ttlMs: number, createdBy: string): Promise<NewLink> {
  const token = randomBytes(32).toString('base64url');
  const made = await MADE.one(
    tx,
    `INSERT INTO sign_in_links (token_hash, purpose, email, created_by, expires_at)
     VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond') RETURNING id, expires_at`,
    [hash(token), purpose, email, createdBy, ttlMs],
  );
  return { id: made.id, token, expiresAt: made.expires_at };
}
