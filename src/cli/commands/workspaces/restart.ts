import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentWorkspaceChange } from '../../../wire/presenters.ts';
import type { WorkspaceChangeAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `workspaces restart <slug|email>`: asks for a fresh code container (audited `container.restart-code`); refused when stopped (exit 4). */
export default class WorkspacesRestart extends CliCommand {
  static override description = "Restart a workspace's code container (a fresh container; the files stay). Refused when the workspace is stopped.";
  static override examples = ['<%= config.bin %> workspaces restart ada'];
  static override args = { workspace: Args.string({ description: "the workspace's slug, or its owner's email", required: true }) };

  async run(): Promise<WorkspaceChangeAnswer> {
    const { args } = await this.parse(WorkspacesRestart);
    const { store } = await this.controlPlane();
    const found = await store.workspaces.resolve(args.workspace);
    const workspace = await store.workspaces.restartCode(CLI_ACTOR, found.id);
    this.say(`Workspace ${workspace.slug} gets a fresh code container.${await this.unattended()}`);
    return { workspace: presentWorkspaceChange(workspace) };
  }
}
