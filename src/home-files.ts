/**
 * A student's files as a coach's look reads them: read by the control plane from the workspace's
 * home volume (WorkspaceRuntime.inspectHome: a helper container of ours that mounts it read-only,
 * with no network), never through the student's editor, session or origin, whether the workspace
 * runs or not. Paths are relative to the home and checked twice: here by their text (no absolute
 * path, no `.` or `..`), and by the helper against where they lead (a link out of the home is
 * refused; a link is never followed for a read). A file is shown as text: its first
 * HOME_FILE_SHOWN_BYTES (a 2 GB file costs no more), or named binary when it holds a NUL or is not
 * UTF-8; nothing of it is ever run or rendered.
 */
import { AppError, ConflictError, NotFoundError, UnavailableError, ValidationError } from './errors.ts';
import { HomeUnreadableError, names, type HomeAnswer, type HomeEntry, type HomeRequest } from './docker/runtime.ts';

/** How much of a file a look shows. */
export const HOME_FILE_SHOWN_BYTES = 256 * 1024;
/** The longest path a look asks for. */
const PATH_MAX = 1024;
/** How much of a file's start is looked at for a NUL (as git does, to call it binary). */
const BINARY_PROBE_BYTES = 8000;

/** One folder of the home: its entries, folders first, then by name. */
export interface HomeListing {
  path: string;
  entries: HomeEntry[];
  /** It holds more entries than a listing gives (HOME_LIST_MAX). */
  truncated: boolean;
}

/** One file of the home, as a look shows it. */
export interface HomeFile {
  path: string;
  size: number;
  /** The bytes shown (at most HOME_FILE_SHOWN_BYTES). */
  shownBytes: number;
  truncated: boolean;
  /** A NUL in its start, or not UTF-8: not shown. */
  binary: boolean;
  text: string | null;
}

/**
 * A path inside the home as a look asks for it (`src/main/java`, '' for the home itself): slashes
 * at either end and doubled ones are dropped; 400 `invalid_home_path` for a NUL, a `.` or `..`
 * segment, or one longer than PATH_MAX.
 */
export function homePath(raw: string): string {
  if (raw.length > PATH_MAX || raw.includes('\0'))
    throw ValidationError('invalid_home_path', `A path in the home has at most ${PATH_MAX} characters and no NUL.`);
  const segments = raw.split('/').filter((segment) => segment !== '');
  if (segments.some((segment) => segment === '.' || segment === '..'))
    throw ValidationError('invalid_home_path', `${JSON.stringify(raw)} is not a path inside the home: no "." or ".." segment.`);
  return segments.join('/');
}

/** Whether bytes are text to show: no NUL in their start, and UTF-8 (a character cut at the end is fine). */
export function isText(bytes: Buffer): boolean {
  if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: true });
    return true;
  } catch {
    return false;
  }
}

type Inspect = (volume: string, workspace: { workspaceId: string; slug: string }, image: string, request: HomeRequest) => Promise<HomeAnswer>;

/** Reads workspaces' homes for looks (see the file comment). */
export class HomeFiles {
  private readonly inspect: Inspect;
  private readonly image: string;
  private readonly onFailure: (error: unknown) => void;

  /**
   * `runtime`: the engine (its inspectHome); `image`: the workspace image, which the helper is made
   * from; `onFailure`: told of a read that failed for a reason of the server's (the engine away, its
   * node down, the image missing), for which the coach is answered 503 `home_unavailable`.
   */
  constructor(runtime: { inspectHome: Inspect }, image: string, onFailure: (error: unknown) => void) {
    this.inspect = (...args) => runtime.inspectHome(...args);
    this.image = image;
    this.onFailure = onFailure;
  }

  /** A folder's entries: 404 `home_path_not_found`, 400 `home_path_wrong_kind` (a file) or `invalid_home_path` (out of the home). */
  async list(workspace: { id: string; slug: string; spec: { homeVolume: string | null } }, raw: string): Promise<HomeListing> {
    const path = homePath(raw);
    const answer = await this.ask(workspace, { op: 'list', path });
    if (answer.outcome !== 'listed') throw refusal(answer.outcome, path);
    const entries = answer.entries.toSorted((a, b) => Number(b.kind === 'dir') - Number(a.kind === 'dir') || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { path, entries, truncated: answer.truncated };
  }

  /** A file's start, as text or named binary; the same refusals as list (a folder or a link: `home_path_wrong_kind`). */
  async read(workspace: { id: string; slug: string; spec: { homeVolume: string | null } }, raw: string): Promise<HomeFile> {
    const path = homePath(raw);
    if (path === '') throw ValidationError('home_path_wrong_kind', 'The home is a folder, not a file.');
    const answer = await this.ask(workspace, { op: 'read', path, maxBytes: HOME_FILE_SHOWN_BYTES });
    if (answer.outcome !== 'read') throw refusal(answer.outcome, path);
    const bytes = answer.bytes.subarray(0, HOME_FILE_SHOWN_BYTES);
    const binary = !isText(bytes);
    return {
      path,
      size: answer.size,
      shownBytes: binary ? 0 : bytes.length,
      truncated: answer.size > bytes.length,
      binary,
      text: binary ? null : bytes.toString('utf8'),
    };
  }

  private async ask(workspace: { id: string; slug: string; spec: { homeVolume: string | null } }, request: HomeRequest): Promise<HomeAnswer> {
    try {
      return await this.inspect(names.home(workspace), { workspaceId: workspace.id, slug: workspace.slug }, this.image, request);
    } catch (error) {
      if (error instanceof AppError) throw error;
      if (error instanceof HomeUnreadableError) throw ConflictError('home_path_unreadable', `${error.message} The student made it so.`);
      // The engine away, its node down, the image missing, a helper that took too long: said to the operator, not to the coach's page.
      this.onFailure(error);
      throw UnavailableError('home_unavailable', "The workspace's home cannot be read right now (the server's log says why). Try again in a moment.", 5);
    }
  }
}

/** The refusal of an answer that is not the one asked for (a listing where a file was asked, or the reverse, is the wrong kind too). */
function refusal(outcome: HomeAnswer['outcome'], path: string): AppError {
  const shown = path === '' ? 'the home' : JSON.stringify(path);
  switch (outcome) {
    case 'missing':
      return NotFoundError('home_path_not_found', `Nothing is at ${shown} in the home.`);
    case 'outside':
      return ValidationError('invalid_home_path', `${shown} leads out of the home (a link): only the home's own files are shown.`);
    case 'not_a_directory':
      return ValidationError('home_path_wrong_kind', `${shown} is not a folder.`);
    case 'not_a_file':
    case 'listed':
    case 'read':
      return ValidationError('home_path_wrong_kind', `${shown} is not a file that can be shown (a folder, a link, or a special file).`);
  }
}
