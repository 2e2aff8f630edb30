import { ImageMissingError, type RuntimeEnvironment } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';

export interface WorkspaceEnvironmentOptions {
  runtime: Pick<RuntimeEnvironment, 'ensureNetwork' | 'imageExists'>;
  /** Logger of `control.containers`. */
  log: Logger;
  /** The workspace network (WORKSPACE_NETWORK) and image (WORKSPACE_IMAGE). */
  template: { network: string; image: string };
}

/**
 * What workspaces need around them on the engine, one job of the workspace controller: the
 * workspace network, made sure of before the first container is created (its trigger), and the
 * workspace image, looked for at start and said missing once (never pulled: the operator builds or
 * pulls it). Each is said in the operator's log once, not with every workspace.
 */
export class WorkspaceEnvironment {
  private readonly options: WorkspaceEnvironmentOptions;
  private networkChecked = false;
  private missingImageReported: string | undefined;

  constructor(options: WorkspaceEnvironmentOptions) {
    this.options = options;
  }

  /** At start: says in one line when the workspace image is missing (no workspace can open yet); an engine that does not answer says nothing here. */
  async checkImage(): Promise<void> {
    const { image } = this.options.template;
    if (!(await this.options.runtime.imageExists(image).catch(() => true))) this.imageMissing(new ImageMissingError(image));
  }

  /**
   * Makes sure of the workspace network before the first container is created (the engine makes a
   * missing one isolated, and keeps it from link-local addresses where it may); says once, as a
   * warning, when workspaces on it can reach each other, or a cloud's metadata service.
   */
  async ensureNetwork(): Promise<void> {
    if (this.networkChecked) return;
    const { runtime, template, log } = this.options;
    const { isolated, created, firewall } = await runtime.ensureNetwork(template.network);
    if (firewall && !firewall.applied)
      log.warning(
        { network: template.network, reason: firewall.reason, commands: firewall.commands },
        `workspaces on ${template.network} can reach link-local addresses (a cloud's metadata service, 169.254.169.254): the control plane could not write the firewall rules (${firewall.reason}); run these as root on the host: ${firewall.commands.join('; ')}`,
      );
    if (created) log.info({ network: template.network }, 'created the workspace network (containers on it cannot reach each other)');
    if (!isolated) {
      log.warning(
        { network: template.network },
        `workspaces on the network ${template.network} can reach each other's editors: set WORKSPACE_NETWORK to a network with inter-container traffic off (the default, classroom-workspaces, is made so)`,
      );
    }
    this.networkChecked = true;
  }

  /** Says once (per image) in the operator's log that the workspace image is missing and how to get it. */
  imageMissing(error: ImageMissingError): void {
    if (this.missingImageReported === error.image) return;
    this.missingImageReported = error.image;
    this.options.log.error({ image: error.image }, error.message);
  }

  /** Whether the image said missing still is (asks the engine only then); once it is there, it is no longer said missing. */
  async imageStillMissing(): Promise<boolean> {
    if (!this.missingImageReported) return false;
    if (!(await this.options.runtime.imageExists(this.options.template.image))) return true;
    this.missingImageReported = undefined;
    return false;
  }
}
