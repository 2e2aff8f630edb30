/**
 * The control plane as the editor's pages reach it: the student API of this workspace under the
 * editor's own address (`<editor>/.cp/api/...`: `/u/<slug>/.cp/api/` in path mode, the workspace's
 * host in host mode), with the browser's own credentials for that address (the session, or the
 * workspace's cookie). No token, no other path: the editor's container itself has no way to the
 * control plane, and what the browser may do here is what its student may do on their workspace.
 */

/** A run as the student API shows it (src/wire/presenters.ts presentRun). */
export interface RunView {
  id: string;
  status: 'queued' | 'running' | 'stopped' | 'failed' | 'canceled';
  desiredState: 'running' | 'stopped';
  queuedAt: string;
  readyAt: string | null;
  endedAt: string | null;
  exitCode: number | null;
  reason: string | null;
  output: string | null;
  outputLength: number;
  outputTruncated: boolean;
}

/** The workspace as the student API shows it (src/wire/presenters.ts presentStudentWorkspace). */
export interface WorkspaceView {
  id: string;
  slug: string;
  desiredState: 'running' | 'stopped' | 'deleted';
  observedState: string;
  statusMessage: string;
  ready: boolean;
  idle?: { stopsAt: string | null; warnFrom: string | null };
  run?: RunView | null;
  /** How full the home is against its bound; `message` (null when ok) says how much is used and how to free it. */
  disk?: { usedBytes: number; limitBytes: number; level: 'ok' | 'near' | 'full' | 'unmeasured'; message: string | null } | null;
  /** The workspace page on the control plane. */
  pageUrl?: string;
  /** Who stopped it and when (null while it is wanted running); `afterIdleMinutes` for the idle sweep. */
  stopped?: { by: 'student' | 'coach' | 'operator' | 'idle'; at: string; afterIdleMinutes?: number } | null;
  /**
   * A coach's read-only look while it lasts: who (their name, else their email: their own text), since
   * when, which look, and whether the coach still asks the student first (LOOK_CONSENT=ask); null: none.
   */
  lookedAt?: LookedAt | null;
  /** The lessons a coach handed out that reached the home, newest first, and where each landed. */
  lessons?: StudentLesson[];
}

/** A lesson that reached the home (src/wire/schemas.ts StudentLesson). */
export interface StudentLesson {
  name: string;
  version: number;
  /** Under `lessons/` of the home. */
  folder: string;
  deliveredAt: string;
  /** It landed beside an earlier folder of the same name (the student's, as they left it). */
  beside: boolean;
}

/** A coach looking, or asking to (src/wire/schemas.ts StudentWorkspace `lookedAt`). */
export interface LookedAt {
  by: string;
  since: string;
  lookId: string;
  asking: boolean;
}

/** A look as the student's answer returns it (src/wire/schemas.ts Look; what the editor uses of it). */
export interface LookView {
  id: string;
  state: 'asking' | 'accepted' | 'declined';
}

/** The student's open help request as the student API shows it (src/wire/schemas.ts StudentHelp). */
export interface HelpView {
  id: string;
  state: 'waiting' | 'taken' | 'resolved' | 'withdrawn';
  /** What the student wrote, plain text; null: nothing. */
  message: string | null;
  createdAt: string;
  /** Its place among the waiting requests (1: next); null unless waiting. */
  place: number | null;
  /** The coach coming (`name` is '' when their account has none). */
  takenBy: { name: string; email: string } | null;
  takenAt: string | null;
}

/** An error answer of the API: its status, code and message (safe to show), and its Retry-After in seconds when it said one. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly retryAfterSeconds: number | undefined;
  constructor(status: number, code: string, message: string, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** How a run's output stream ended (the `end` event). */
export interface RunEnd {
  id: string;
  status: RunView['status'];
  reason: string | null;
  exitCode: number | null;
}

export const isActive = (run: RunView | null | undefined): run is RunView & { status: 'queued' | 'running' } =>
  run?.status === 'queued' || run?.status === 'running';

/** The student API of the workspace whose editor is at `base` (ending in a slash). */
export class Classroom {
  readonly base: string;

  constructor(base: string) {
    this.base = base;
  }

  /** The address of an API path (`runs`, `workspace`, ...). */
  url(path: string): string {
    return new URL(`.cp/api/${path}`, this.base).href;
  }

  /** One call; a POST with `payload` sends it as its JSON body. */
  private async call<T>(method: 'GET' | 'POST', path: string, payload?: unknown): Promise<T> {
    const init: RequestInit =
      method === 'POST' && payload !== undefined
        ? { method, headers: { accept: 'application/json', 'content-type': 'application/json' }, body: JSON.stringify(payload) }
        : { method, headers: { accept: 'application/json' } };
    const response = await fetch(this.url(path), { ...init, credentials: 'include' });
    const body = (await response.json().catch(() => ({}))) as { error?: { code: string; message: string } };
    if (!response.ok) {
      throw new ApiError(response.status, body.error?.code ?? 'unknown', body.error?.message ?? `The control plane answered ${response.status}.`);
    }
    return body as T;
  }

  async workspace(): Promise<WorkspaceView> {
    return (await this.call<{ workspace: WorkspaceView }>('GET', 'workspace')).workspace;
  }

  /** Starts a run (409 `run_active` while one is active, `workspace_not_running` while the workspace is stopped). */
  async run(): Promise<RunView> {
    return (await this.call<{ run: RunView }>('POST', 'runs')).run;
  }

  async stop(runId: string): Promise<RunView> {
    return (await this.call<{ run: RunView }>('POST', `runs/${encodeURIComponent(runId)}/stop`)).run;
  }

  /** The student is here: the idle sweep's count starts again. */
  async keep(): Promise<WorkspaceView> {
    return (await this.call<{ workspace: WorkspaceView }>('POST', 'workspace/keep')).workspace;
  }

  /** The workspace's open help request (raised here or on the workspace page), or null. */
  async help(): Promise<HelpView | null> {
    return (await this.call<{ help: HelpView | null }>('GET', 'help')).help;
  }

  /**
   * Raises a hand, with `message` (plain text) when there is one: 409 `help_request_open` while one
   * is open, 429 `too_many_help_requests` past the raises allowed (each with a message for the student).
   */
  async raiseHand(message: string | undefined): Promise<HelpView> {
    return (await this.call<{ help: HelpView }>('POST', 'help', message ? { message } : {})).help;
  }

  /** Takes the open help request back (404 `help_request_not_found` when none is open). */
  async withdrawHelp(): Promise<HelpView> {
    return (await this.call<{ help: HelpView }>('POST', 'help/withdraw')).help;
  }

  /**
   * The student's answer to a coach asking to look (LOOK_CONSENT=ask): lets it happen (`accept`) or
   * says no; 409 `look_answered` when it was answered the other way, 404 `look_not_found` once it ended.
   */
  async answerLook(lookId: string, accept: boolean): Promise<LookView> {
    return (await this.call<{ look: LookView }>('POST', `looks/${encodeURIComponent(lookId)}/${accept ? 'accept' : 'decline'}`)).look;
  }

  /**
   * Follows a run's output from character `from`: `onOutput(offset, text)` for each piece as it is
   * kept, then resolves with the run's end. Rejects when the connection breaks (a cut included) or
   * `onOutput` throws (the caller resumes from the last offset it got), or when the stream is refused
   * (an ApiError, with Retry-After when one was said); `signal` stops it.
   */
  async follow(runId: string, from: number, onOutput: (offset: number, text: string) => void, signal: AbortSignal): Promise<RunEnd> {
    const response = await fetch(this.url(`runs/${encodeURIComponent(runId)}/output?from=${from}`), {
      credentials: 'include',
      headers: { accept: 'text/event-stream' },
      signal,
    });
    if (!response.ok || !response.body) {
      // Refused (429: too many output streams open): the caller tries again after Retry-After.
      const body = (await response.json().catch(() => ({}))) as { error?: { code: string; message: string } };
      const retryAfter = Number(response.headers.get('retry-after'));
      throw new ApiError(
        response.status,
        body.error?.code ?? 'stream_refused',
        body.error?.message ?? `The run's output could not be followed (${response.status}).`,
        Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
      );
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    // However it ends (the run's end, a lost connection, a piece that does not follow on), it ends here.
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error('the output stream ended before the run did');
        buffered += value;
        let end = buffered.indexOf('\n\n');
        while (end !== -1) {
          const event = parseEvent(buffered.slice(0, end));
          buffered = buffered.slice(end + 2);
          if (event.type === 'output') {
            const { offset, text } = JSON.parse(event.data) as { offset: number; text: string };
            onOutput(offset, text);
          } else if (event.type === 'end') return JSON.parse(event.data) as RunEnd;
          end = buffered.indexOf('\n\n');
        }
      }
    } finally {
      reader.cancel().catch(() => undefined);
    }
  }
}

/** One server-sent event's type and data (comments and ids are not needed here). */
function parseEvent(block: string): { type: string; data: string } {
  let type = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event: ')) type = line.slice(7);
    else if (line.startsWith('data: ')) data.push(line.slice(6));
  }
  return { type, data: data.join('\n') };
}
