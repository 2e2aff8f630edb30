import { presentSummary, presentWorkspaceRow } from '../../wire/presenters.ts';
import type { CliStatus } from '../../wire/schemas.ts';
import { RECONCILER_LEASE } from '../../store/leases.ts';
import { CliCommand } from '../command.ts';

/** Relative age of a time, for a terminal: `5s ago`, `3m ago`, `2h ago`, `4d ago`. */
function ago(date: Date | null): string {
  if (!date) return '—';
  const seconds = Math.max(0, Math.round((Date.now() - date.getTime()) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86_400)}d ago`;
}

/** `status`: the servers running and which of them leads, capacity and every workspace with its wanted and observed state, from the database (never from Docker). */
export default class Status extends CliCommand {
  static override description =
    'Show the servers running and which leads, the capacity (running, wanted running, cap) and every workspace: wanted and observed state, status message, last activity.';
  static override examples = ['<%= config.bin %> status', '<%= config.bin %> status --json'];

  async run(): Promise<CliStatus> {
    await this.parse(Status);
    const { store, config } = await this.controlPlane();
    const [summary, page, servers, lease] = await Promise.all([
      store.workspaceList.summary(),
      store.workspaceList.page({ sort: 'slug', order: 'asc', offset: 0, limit: Number.MAX_SAFE_INTEGER }),
      store.servers.live(),
      store.leases.held(RECONCILER_LEASE),
    ]);
    const { capacity, activeBuilds } = presentSummary(summary);
    const leader = servers.find((server) => server.id === lease?.holder);
    if (servers.length === 0) this.say('No control plane is running: the observed states below are as a server last saw them.');
    else
      this.say(
        `Servers: ${servers.length} running; ${leader ? `the leader (running the controllers) is ${leader.hostname} pid ${leader.pid}, term ${lease!.term}` : 'none leads now (another takes the lease within seconds)'}.`,
      );
    this.say(
      `Capacity: ${capacity.running} running, ${capacity.wantedRunning} wanted running, cap ${capacity.cap} (${capacity.source === 'override' ? 'set at runtime' : 'MAX_ACTIVE_CONTAINERS'}); ${activeBuilds} active builds.`,
    );
    this.table(
      page.rows,
      {
        slug: (w) => w.slug,
        owner: (w) => w.owner ?? '— (deleted)',
        wanted: (w) => w.desiredState,
        observed: (w) => w.observedState,
        'last active': (w) => ago(w.lastActivityAt),
        message: (w) => w.statusMessage,
      },
      'No workspaces yet: a student gets one at their first sign-in.',
    );
    return {
      capacity: { cap: capacity.cap, source: capacity.source, wantedRunning: capacity.wantedRunning, running: capacity.running, activeBuilds },
      workspaces: page.rows.map((row) => presentWorkspaceRow(row, config.homeDisk)),
      servers: servers.map((server) => ({
        publicUrl: server.publicUrl,
        hostname: server.hostname,
        pid: server.pid,
        startedAt: server.startedAt.toISOString(),
        leader: server === leader,
      })),
      leaseTerm: leader ? lease!.term : null,
    };
  }
}
