import { Flags } from '@oclif/core';
import { NotFoundError } from '../../../errors.ts';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { JOIN_CODE_MAX_HOURS, JOIN_CODE_MIN_HOURS, JOIN_LABEL_MAX } from '../../../store/join-codes.ts';
import { presentJoinCode } from '../../../wire/presenters.ts';
import type { JoinCodeAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `join-codes open --hours <n> [--label <text>]`: opens a join code (audited `join_code.open`); refused while JOIN_CODES=off. */
export default class JoinCodesOpen extends CliCommand {
  static override description =
    'Open a join code for 1 to 12 hours (JOIN_CODES=on): students type it and a display name on /join and get a guest workspace until it expires; then each guest is backed up and removed.';
  static override examples = ['<%= config.bin %> join-codes open --hours 3 --label "Outreach day"', '<%= config.bin %> join-codes open --hours 1 --json'];
  static override flags = {
    hours: Flags.integer({
      description: `hours the code lasts (${JOIN_CODE_MIN_HOURS} to ${JOIN_CODE_MAX_HOURS})`,
      required: true,
      min: JOIN_CODE_MIN_HOURS,
      max: JOIN_CODE_MAX_HOURS,
    }),
    label: Flags.string({ description: `what it is for, shown beside it (at most ${JOIN_LABEL_MAX} characters)` }),
  };

  async run(): Promise<JoinCodeAnswer> {
    const { flags } = await this.parse(JoinCodesOpen);
    if (!this.settings().joinCodes) throw NotFoundError('join_codes_off', 'Join codes are off: set JOIN_CODES=on (for the server too) to use them.');
    const code = await (await this.controlPlane()).store.joinCodes.open(CLI_ACTOR, { hours: flags.hours, label: flags.label ?? null });
    this.say(
      `Join code ${code.code}${code.label ? ` (${code.label})` : ''}: open until ${code.expiresAt.toISOString().replace('T', ' ').slice(0, 16)} UTC. Students type it at /join.`,
    );
    return { code: presentJoinCode(code) };
  }
}
