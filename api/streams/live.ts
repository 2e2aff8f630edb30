/**
 * What an admin's open panel hears without reloading: every change of desired state and of observed
 * status (the change feed), every new capacity refusal (a student's repeats within a minute are
 * folded into it, not told again), and `resync` when this replica's database listener (re)started
 * listening (changes may have been missed), as server-sent events on `GET /admin/events`.
 * Events only say what changed; the panel then reads it through the API it uses for everything else.
 * A stream opened with an admin's session ends as soon as that admin may no longer read it: demoted
 * or deleted (a users change, checked again), or signed out (its session ended).
 */
import { PassThrough } from 'node:stream';
import type { ChangeFeed } from '../../src/db/changes.ts';
import { presentRefusal } from '../../src/wire/presenters.ts';
import type { RefusalRecord, RefusalStore } from '../../src/store/refusals.ts';
import { sessionDigest } from '../../src/store/sessions.ts';

/** How many refusals' ids are remembered as told (a replica hears its own refusal twice: at once, and by NOTIFY). */
const TOLD_KEPT = 256;

/** How often an idle event stream sends a comment, so that proxies and browsers keep it open. */
const HEARTBEAT_MS = 15_000;

/** Who opened a stream with a session: it ends when they may no longer read it. */
export interface StreamOwner {
  userId: string;
  sessionId: string;
}

/** The live events of this control plane (see the file comment). */
export class LiveEvents {
  private readonly refusals: Pick<RefusalStore, 'record' | 'get' | 'recent'>;
  /** The ids of the refusals told to the panels lately, oldest first. */
  private readonly told = new Set<string>();
  private readonly unsubscribeRefusals: () => void;
  private readonly unsubscribeListening: () => void;
  private readonly streams = new Set<PassThrough>();
  private readonly owners = new Map<PassThrough, StreamOwner>();
  private readonly unsubscribe: () => void;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly mayRead: (userId: string) => Promise<boolean>;

  /** `mayRead(userId)`: whether that user may still read the stream (an admin, as the admin gate requires). */
  constructor(changes: ChangeFeed, refusals: Pick<RefusalStore, 'record' | 'get' | 'recent'>, mayRead: (userId: string) => Promise<boolean>) {
    this.mayRead = mayRead;
    this.refusals = refusals;
    this.unsubscribeRefusals = changes.subscribeSignal('refusal', (id) => void this.tellRefusal(id));
    // Changes may have been missed before the database listener (re)started listening (nothing is
    // replayed): every open panel reads again.
    this.unsubscribeListening = changes.onListening(() => this.send('resync', {}));
    this.unsubscribe = changes.subscribe((change) => {
      if (change.kind === 'users') void this.recheck();
      this.send('change', change);
    });
    this.heartbeat = setInterval(() => {
      for (const stream of this.streams) stream.write(': still here\n\n');
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /**
   * Records a refusal at the cap; resolves true when it is a new one, which every replica's open
   * panels are told (see tellRefusal), false when it was folded into the student's refusal of the
   * last minute (RefusalStore.record), which no panel is told again.
   */
  async refused(refusal: Omit<RefusalRecord, 'id' | 'at' | 'lastAt' | 'count'>): Promise<boolean> {
    return (await this.refusals.record(refusal)).first;
  }

  /** The refusals of the last hour, by any replica, newest first. */
  recentRefusals(): Promise<RefusalRecord[]> {
    return this.refusals.recent();
  }

  /** Tells the open panels of a refusal (signalled by whichever replica made it), once. */
  private async tellRefusal(id: string): Promise<void> {
    if (this.told.has(id)) return;
    this.told.add(id);
    if (this.told.size > TOLD_KEPT) this.told.delete(this.told.values().next().value!);
    const refusal = await this.refusals.get(id).catch(() => undefined);
    if (refusal) this.send('refusal', presentRefusal(refusal));
  }

  /**
   * A new event stream (ended by close, and when its `owner` may no longer read it), starting with a
   * comment so the browser sees it open at once. Without an owner (the admin bearer token) it ends
   * only with the server.
   */
  open(owner?: StreamOwner): PassThrough {
    const stream = new PassThrough();
    this.streams.add(stream);
    if (owner) this.owners.set(stream, owner);
    stream.once('close', () => (this.streams.delete(stream), this.owners.delete(stream)));
    stream.write(': connected\n\n');
    return stream;
  }

  /** A session ended (sign-out, on any replica; `digest` is sessionDigest of its id): its streams end now. */
  sessionEnded(digest: string): void {
    for (const [stream, owner] of this.owners) if (sessionDigest(owner.sessionId) === digest) stream.destroy();
  }

  /** Ends every stream and stops following changes (the server is stopping). */
  close(): void {
    this.unsubscribe();
    this.unsubscribeRefusals();
    this.unsubscribeListening();
    clearInterval(this.heartbeat);
    for (const stream of this.streams) stream.end();
  }

  /** Ends every stream whose owner may no longer read it (a failed check ends it too: it is opened again, and checked, at once). */
  private async recheck(): Promise<void> {
    const owners = [...this.owners];
    const allowed = await Promise.all(owners.map(([, owner]) => this.mayRead(owner.userId).catch(() => false)));
    owners.forEach(([stream], index) => allowed[index] || stream.destroy());
  }

  private send(event: string, data: unknown): void {
    if (this.streams.size === 0) return;
    const message = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const stream of this.streams) stream.write(message);
  }
}
