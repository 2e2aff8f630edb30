import { Args, Flags } from '@oclif/core';
import { maySignIn, serviceAdmins } from '../../../allowlist/allowlist.ts';
import { configuredOrigin } from '../../../config.ts';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { MAX_SIGN_IN_LINK_TTL_MS, SIGN_IN_LINK_TTL_MS } from '../../../store/sign-in-links.ts';
import { presentLink } from '../../../wire/presenters.ts';
import type { SignInLinkAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `users sign-in-link <email>`: a one-time link that signs an allowlisted email in (audited `auth.sign-in-link`). */
export default class UsersSignInLink extends CliCommand {
  static override description =
    'Make a one-time link that signs an allowlisted email in, without an identity provider: for a demo, a class without one, or when it is down. It works once, for an hour unless --expires-in says otherwise; the account is made at first use.';
  static override examples = ['<%= config.bin %> users sign-in-link ana@school.org', '<%= config.bin %> users sign-in-link ana@school.org --expires-in 480'];
  static override args = { email: Args.string({ description: 'the email to sign in (on the allowlist)', required: true }) };
  static override flags = {
    'expires-in': Flags.integer({
      description: `minutes the link works (1 to ${MAX_SIGN_IN_LINK_TTL_MS / 60_000})`,
      default: SIGN_IN_LINK_TTL_MS / 60_000,
      min: 1,
      max: MAX_SIGN_IN_LINK_TTL_MS / 60_000,
    }),
  };

  async run(): Promise<SignInLinkAnswer> {
    const { args, flags } = await this.parse(UsersSignInLink);
    const plane = await this.controlPlane();
    const entries = await plane.store.allowlist.entries();
    const admins = serviceAdmins(plane.config.serviceAdminEmails);
    const link = await plane.store.links.createSignIn(CLI_ACTOR, args.email, {
      isAllowed: (email) => maySignIn(email, { admins, entries }),
      ttlMs: flags['expires-in'] * 60_000,
    });
    // The running server's own address; else the configured one, which is only a guess without PUBLIC_URL.
    const [server] = await plane.store.servers.live();
    const origin = server?.publicUrl ?? configuredOrigin(plane.config);
    if (!server && !plane.config.publicUrl) {
      this.note(
        `no server is running and PUBLIC_URL is not set: the link assumes the server will answer at ${origin}; set PUBLIC_URL to the address students open.`,
      );
    }
    const presented = presentLink(link, origin);
    this.say(`${presented.url}\nSigns in ${link.email} once, until ${presented.expiresAt}. Send it to them only: whoever opens it is signed in as them.`);
    return { link: presented };
  }
}
