import { presentJoinCode } from '../../../wire/presenters.ts';
import type { JoinCodeList } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `join-codes list`: the join codes, as the panel's (GET /admin/join-codes): the 50 newest, each with its state, expiry and guests. */
export default class JoinCodesList extends CliCommand {
  static override description =
    'List the join codes (the 50 newest, open and past), each with its state, when it expires, how many guests joined and are still here, and the backups its expiry made.';
  static override examples = ['<%= config.bin %> join-codes list', '<%= config.bin %> join-codes list --json'];

  async run(): Promise<JoinCodeList> {
    await this.parse(JoinCodesList);
    const codes = await (await this.controlPlane()).store.joinCodes.list();
    this.table(
      codes,
      {
        id: (c) => c.id,
        code: (c) => c.code,
        label: (c) => c.label,
        state: (c) => (c.handledAt ? `${c.state}, removed` : c.state),
        expires: (c) => c.expiresAt.toISOString().replace('T', ' ').slice(0, 16),
        guests: (c) => `${c.guests.length} of ${c.joined}`,
      },
      'No join codes.',
    );
    return { codes: codes.map(presentJoinCode) };
  }
}
