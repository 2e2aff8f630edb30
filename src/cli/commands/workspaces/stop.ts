import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentWorkspaceChange } from '../../../wire/presenters.ts';
import type { WorkspaceChangeAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `workspaces stop <slug|email>`: sets a workspace wanted stopped (audited `container.stop`); the controller stops it. */
export default class WorkspacesStop extends CliCommand {
  static override description =
    "Stop a workspace's containers (its files stay). The running server's controller stops them at once; with no server running, it says so, and the server stops them when it starts.";
  static override examples = ['<%= config.bin %> workspaces stop ada', '<%= config.bin %> workspaces stop ada@school.org'];
  static override args = { workspace: Args.string({ description: "the workspace's slug, or its owner's email", required: true }) };

  async run(): Promise<WorkspaceChangeAnswer> {
    const { args } = await this.parse(WorkspacesStop);
    const { store } = await this.controlPlane();
    const found = await store.workspaces.resolve(args.workspace);
    const workspace = await store.workspaces.stop(CLI_ACTOR, found.id, 'operator');
    const unattended = await this.unattended();
    this.say(`Workspace ${workspace.slug} is set to stop.${unattended}`);
    return { workspace: presentWorkspaceChange(workspace) };
  }
}
