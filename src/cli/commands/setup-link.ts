import { ConflictError } from '../../errors.ts';
import { configuredOrigin } from '../../config.ts';
import { linkPath } from '../../store/sign-in-links.ts';
import { CliCommand } from '../command.ts';

/** `setup-link`: a new first-run setup link while no admin exists (the earlier one stops working). */
export default class SetupLink extends CliCommand {
  static override description =
    'Print a new first-run setup link (the server prints one at start while no admin exists): whoever opens it within 15 minutes becomes the first admin. Any earlier one stops working.';
  static override examples = ['<%= config.bin %> setup-link'];

  async run(): Promise<{ url: string; expiresAt: string }> {
    await this.parse(SetupLink);
    const plane = await this.controlPlane();
    const link = await plane.store.links.createSetup();
    if (!link) throw ConflictError('admin_exists', 'An admin exists already: sign in, or make a sign-in link with "users sign-in-link <email>".');
    const url = `${configuredOrigin(plane.config)}${linkPath('setup', link.token)}`;
    const expiresAt = link.expiresAt.toISOString();
    this.say(`${url}\nWhoever opens it first, until ${expiresAt}, becomes the first admin.`);
    return { url, expiresAt };
  }
}
