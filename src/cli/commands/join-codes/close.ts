import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentJoinCode } from '../../../wire/presenters.ts';
import type { JoinCodeAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `join-codes close <id>`: closes a join code early (audited `join_code.close`); its expiry follows. */
export default class JoinCodesClose extends CliCommand {
  static override description =
    "Close a join code early: no one joins with it any more, its guests are signed out, and the server's leader backs up each guest's home and removes the guest, as at its expiry.";
  static override examples = ['<%= config.bin %> join-codes close 3f2b…', '<%= config.bin %> join-codes close ABCD-EFGH'];
  static override args = { code: Args.string({ description: 'the code (ABCD-EFGH) or its id', required: true }) };

  async run(): Promise<JoinCodeAnswer> {
    const { args } = await this.parse(JoinCodesClose);
    const { store } = await this.controlPlane();
    const before = (await store.joinCodes.byCode(args.code)) ?? (await store.joinCodes.get(args.code));
    const code = await store.joinCodes.close(CLI_ACTOR, before?.id ?? args.code);
    this.say(
      before?.state === 'open'
        ? `Closed join code ${code.code}: its ${code.guests.length} guest${code.guests.length === 1 ? '' : 's'} will be backed up and removed.${await this.unattended()}`
        : `Join code ${code.code} was ${code.state} already.`,
    );
    return { code: presentJoinCode(code) };
  }
}
