/**
 * The catalogue of error codes: every code an AppError (src/errors.ts) may carry, each with its one
 * HTTP status and a line saying when it is given. A throw site names a code and writes its own
 * message; the status is the catalogue's, so a code cannot be given with two statuses, and a code
 * that is not here does not compile. The OpenAPI document (api/openapi.ts) lists, for every
 * operation and error status, the codes it may give with these lines; a code that no operation gives
 * says where it is given instead (`outside`), which test/unit/openapi.test.ts checks.
 */

/** Where a code is given when no operation of the OpenAPI document gives it. */
export const OUTSIDE_THE_DOCUMENT = {
  proxy: "the workspace proxy's own answers for an editor, its WebSockets or a simulator (the editor's paths, not the API's)",
  pages: 'the sign-in and setup link pages, which show it on a page',
  cli: 'the operator CLI (its JSON error on stderr and its exit code)',
  import: "an import's end: the `error` that GET /u/{slug}/api/workspace/import answers with 200",
  unread: 'a request the server could not read, which names no operation yet',
  routing: 'a request that matches no operation (no route for its path or its method)',
  unanswered: 'a request whose client left before its answer: nobody receives it',
  internal: "a guard in the server's own work (a controller's step, which logs it; the server's own constants): no client meets it",
} as const;

/** What the catalogue says of one code. */
interface CodeEntry {
  readonly status: number;
  /** When it is given, in one line (the OpenAPI document shows it). */
  readonly description: string;
  /** Why no operation of the OpenAPI document gives it (where it is given instead). */
  readonly outside?: keyof typeof OUTSIDE_THE_DOCUMENT;
}

/** Every error code, by code: its status and when it is given (see the file comment). */
export const ERROR_CODES = {
  // 400: the request is malformed
  validation_error: { status: 400, description: 'The body, the query string or a path parameter is not valid; the message names the field.' },
  invalid_json: { status: 400, description: 'The request body is not valid JSON.' },
  bad_request: { status: 400, description: 'The request could not be read (a body that ended early or was malformed).' },
  unsupported_content_type: { status: 400, description: 'The request body was not sent as `Content-Type: application/json`.' },
  invalid_path: { status: 400, description: 'The path under `/u/<slug>/` is not one (a slug or a segment no path may hold).' },
  websocket_required: { status: 400, description: 'Only WebSocket upgrades are served at this path.', outside: 'proxy' },
  invalid_allowlist_entry: { status: 400, description: 'The allowlist entry is neither an email nor a domain; the message says why.' },
  invalid_email: { status: 400, description: 'The email is not one a person can sign in with; the message says why.' },
  invalid_expiry: { status: 400, description: 'A sign-in link works for 1 to 1440 minutes.', outside: 'cli' },
  import_url_invalid: { status: 400, description: "The import's address is not a repository's plain https:// address." },
  import_not_https: { status: 400, description: "The import's address is not https://." },
  import_branch_invalid: { status: 400, description: 'The branch to import is not a branch name.' },
  import_subfolder_invalid: { status: 400, description: 'The subfolder to import is not a relative path inside the repository.' },
  import_host_unknown: { status: 400, description: "The import's host could not be found (DNS)." },
  import_redirect_invalid: {
    status: 400,
    description: "The repository's address redirects too often, or elsewhere than to a git repository.",
  },
  import_not_git: { status: 400, description: 'The address serves a web page, not a git repository.' },
  import_empty: { status: 400, description: 'The repository has no commits yet.' },
  import_subfolder_outside: { status: 400, description: 'The subfolder is a symbolic link that leads outside it.' },
  import_link_outside: { status: 400, description: 'The project holds a symbolic link to outside the project.', outside: 'import' },
  import_name_unsupported: {
    status: 400,
    description: 'The project holds a name a home cannot hold (not UTF-8, or neither file, folder nor link).',
    outside: 'import',
  },
  backup_tampered: { status: 400, description: 'The backup file does not match its checksum or its manifest; nothing was restored.' },
  backup_truncated: { status: 400, description: 'The backup file ends early; nothing was restored.' },
  backup_not_ours: { status: 400, description: 'The file is not a workspace backup; nothing was restored.' },
  backup_unsupported_owner: { status: 400, description: 'A file of the home has an owner id above what a backup can record.' },
  invalid_exclude: { status: 400, description: 'An exclude of a restore is not a path inside the home.', outside: 'internal' },
  confirmation_required: { status: 400, description: 'The command needs a confirmation and has no terminal: add --yes.', outside: 'cli' },
  usage: { status: 400, description: "The command's arguments or flags are not valid.", outside: 'cli' },
  not_a_swarm: { status: 400, description: 'The command is for workspaces on a swarm (RUNTIME=swarm).', outside: 'cli' },
  invalid_home_path: { status: 400, description: 'The path is not one inside the home (absolute, `..`, or a link that leads out of it).' },
  home_path_wrong_kind: {
    status: 400,
    description: 'The path is a file where a folder was asked, a folder where a file was, or a link (links are not followed).',
  },
  invalid_span: { status: 400, description: 'The span of a report is empty: `since` is not before `until`.' },
  invalid_lesson_name: {
    status: 400,
    description: 'A lesson name is its folder: 1 to 60 letters, digits, spaces, dots, dashes or underscores, beginning with a letter or digit.',
  },
  lesson_archive_invalid: { status: 400, description: 'The upload is not a .tar, .tar.gz or .zip archive, or is damaged; the message says which.' },
  lesson_archive_unsafe: {
    status: 400,
    description: 'The archive holds a path outside its folder, a link, a device or another entry that is neither file nor folder; the message names it.',
  },
  lesson_archive_empty: { status: 400, description: 'The archive holds no file.' },
  invalid_date: { status: 400, description: 'A date flag is not a date, or is in the future where a past one is needed.', outside: 'cli' },
  invalid_flags: { status: 400, description: 'Two flags of the command exclude each other.', outside: 'cli' },
  join_code_wrong: { status: 400, description: 'The join code typed is not one that is open here.', outside: 'pages' },
  invalid_display_name: {
    status: 400,
    description: "A guest's display name is empty, longer than 60 characters, or holds control characters.",
    outside: 'pages',
  },
  // 401, 403: who asks
  authentication_required: { status: 401, description: 'No valid credentials: sign in, or send a valid bearer token.' },
  forbidden: { status: 403, description: 'The credentials do not allow this: not an admin, or not this workspace.' },
  csrf_failed: { status: 403, description: 'A request that changes state came from another site (or without a same-origin Origin).' },
  import_host_refused: { status: 403, description: "The import's host is not one IMPORT_ALLOWED_HOSTS allows." },
  import_address_refused: { status: 403, description: "The import's host resolves to an address that is not to be connected to." },
  // 404: not there
  not_found: { status: 404, description: 'Nothing is served at this path (on a workspace host: no such workspace).' },
  workspace_not_found: { status: 404, description: 'No workspace has this id (or it is being deleted).' },
  run_not_found: { status: 404, description: 'No run has this id (in this workspace).' },
  user_not_found: { status: 404, description: 'No user has this id or email (a user exists once they have signed in).' },
  allowlist_entry_not_found: { status: 404, description: 'The entry is not in the allowlist.' },
  backup_not_found: { status: 404, description: 'No stored backup has this name.' },
  help_request_not_found: { status: 404, description: 'No help request has this id (or the workspace has none open).' },
  join_codes_off: { status: 404, description: 'Join codes are off on this server (JOIN_CODES=off).' },
  join_code_not_found: { status: 404, description: 'No join code has this id.' },
  home_path_unreadable: { status: 409, description: "The file or folder's permissions keep it from the workspace's own user: the student made it unreadable." },
  look_not_found: { status: 404, description: "This coach has no live look at the workspace: it ended, was not kept for a minute, or is another coach's." },
  lesson_not_found: { status: 404, description: 'No lesson has this id.' },
  collection_not_found: { status: 404, description: 'The lesson has no collection with this id.' },
  lesson_source_not_found: { status: 404, description: 'No folder or file is at the path given to `cli lessons create` or `update`.', outside: 'cli' },
  home_path_not_found: { status: 404, description: 'Nothing is at this path in the home.' },
  volume_not_found: { status: 404, description: "The workspace's home volume does not exist (it never started)." },
  node_not_found: { status: 404, description: 'No swarm node has this name.', outside: 'cli' },
  import_repository_not_found: { status: 404, description: 'There is no public repository at the address.' },
  import_branch_not_found: { status: 404, description: 'The repository has no such branch.' },
  import_subfolder_not_found: { status: 404, description: 'The repository has no such folder.' },
  // 405, 408
  method_not_allowed: { status: 405, description: 'No route answers this method here; `Allow` names those that do.', outside: 'routing' },
  request_timeout: { status: 408, description: 'The request did not arrive in time.', outside: 'unread' },
  // 409: the current state does not allow it
  workspace_not_running: { status: 409, description: 'The workspace is stopped: open it first.' },
  workspace_running: { status: 409, description: 'The workspace is running or still stopping: stop it first.' },
  run_active: { status: 409, description: 'A run of the workspace is still active: stop it first.' },
  run_stopping: { status: 409, description: 'The run being restarted did not end within 30 s.' },
  home_disk_full: { status: 409, description: 'The home is at HOME_DISK_LIMIT or could not be measured in full; the message says how to free space.' },
  last_admin: { status: 409, description: 'The last admin cannot be demoted or deleted.' },
  not_allowlisted: { status: 409, description: 'The email is not on the allowlist: add it (or its domain) first.' },
  admin_exists: { status: 409, description: 'An admin exists already: no setup link is made or redeemed.', outside: 'pages' },
  allowlist_file_invalid: { status: 409, description: 'The allowlist file is malformed (edited by hand): fix it first.' },
  import_in_progress: { status: 409, description: 'An import into this workspace is in progress.' },
  help_request_open: { status: 409, description: 'The student has a help request open already (waiting or taken): one at a time.' },
  look_not_accepted: { status: 409, description: 'The student has not let this look happen yet (LOOK_CONSENT=ask), or said no.' },
  look_answered: { status: 409, description: 'The student answered this look the other way already.' },
  lesson_exists: { status: 409, description: 'A lesson of this name exists (names are compared without case): give it a new version instead.' },
  lesson_not_delivered: { status: 409, description: "The lesson has not reached the student's home yet: hand it out first." },
  collection_not_done: { status: 409, description: 'The collection is not done yet: its snapshots are still being taken (or it is due later).' },
  help_request_taken: { status: 409, description: 'Another coach took the help request first; the message says who.' },
  help_request_closed: { status: 409, description: 'The help request was resolved or withdrawn already; the message says which.' },
  slug_unavailable: { status: 409, description: 'No free workspace slug could be found for the email.', outside: 'pages' },
  backup_unrestorable: { status: 409, description: 'The home holds a file a restore could not bring back as it is (a name, a type); the message names it.' },
  restore_not_kept: { status: 409, description: 'The files a restore would replace cannot be kept as a backup (backup_unrestorable); nothing was restored.' },
  restore_target_exists: { status: 409, description: "The restore's staging volume exists already; nothing was restored." },
  volume_not_managed: { status: 409, description: 'The volume is not managed by this control plane; it was left alone.', outside: 'internal' },
  not_confirmed: { status: 409, description: 'The confirmation was declined: nothing was changed.', outside: 'cli' },
  not_draining: { status: 409, description: 'The node is not draining: nothing was changed.', outside: 'cli' },
  // 410, 413, 415
  link_not_valid: { status: 410, description: 'The one-time link was used, expired, or copied incompletely.', outside: 'pages' },
  join_code_expired: { status: 410, description: 'The join code expired or was closed: ask the coach for a new one.', outside: 'pages' },
  payload_too_large: { status: 413, description: 'The request body is larger than the API takes (256 KB).' },
  import_too_large: { status: 413, description: 'The repository is larger than IMPORT_MAX_SIZE.' },
  lesson_too_large: { status: 413, description: 'The lesson is larger than LESSON_MAX_SIZE (unpacked), or holds more than 20,000 entries.' },
  unsupported_content_encoding: { status: 415, description: 'The request body is compressed: send it without Content-Encoding.' },
  unsupported_media_type: { status: 415, description: "The request body's charset or encoding is not supported." },
  // 429: as much as one may (Retry-After)
  too_many_requests: { status: 429, description: 'Too many failed attempts (or sign-in links) from this address; Retry-After says when to try again.' },
  too_many_output_streams: { status: 429, description: 'The reader has OUTPUT_STREAMS_PER_USER run output streams open.' },
  run_output_streams_full: { status: 429, description: 'The run has OUTPUT_STREAMS_PER_RUN output streams open.' },
  too_many_connections: { status: 429, description: 'The workspace has PROXY_MAX_TUNNELS_PER_WORKSPACE connections open.', outside: 'proxy' },
  too_many_replacements: { status: 429, description: 'The workspace was reset or imported into too often lately; the message says when to try again.' },
  too_many_look_reads: {
    status: 429,
    description: "A coach read students' files too often lately (60 a minute: each read starts a helper container); Retry-After says when to try again.",
  },
  too_many_help_requests: { status: 429, description: 'The workspace asked for help too often lately (5 in 10 minutes); Retry-After says when to try again.' },
  too_many_join_attempts: {
    status: 429,
    description: 'Too many wrong join codes from this address (10 in 10 minutes): it is locked out for 15 minutes; Retry-After says when to try again.',
    outside: 'pages',
  },
  // 431, 499
  headers_too_large: {
    status: 431,
    description: 'The request headers are too large (too many cookies); they were cleared where they could be.',
    outside: 'unread',
  },
  caller_gone: { status: 499, description: 'The client left before the answer; nothing was changed.', outside: 'unanswered' },
  // 500, 502, 504: the server or what it calls failed
  internal_error: { status: 500, description: 'Something unexpected failed on the server; it has been logged.' },
  upstream_error: { status: 502, description: 'The editor, simulator or robot could not be reached.', outside: 'proxy' },
  editor_gone: { status: 502, description: 'The editor is not running where it was (restarting).', outside: 'proxy' },
  import_unreachable: { status: 502, description: "The repository's server could not be reached, or the clone failed." },
  upstream_timeout: { status: 504, description: 'The editor, simulator or robot did not answer in time.', outside: 'proxy' },
  import_timeout: { status: 504, description: 'The repository did not finish answering within IMPORT_TIMEOUT_SECONDS.' },
  // 503: not now (Retry-After)
  database_unavailable: { status: 503, description: 'The database cannot be reached right now.' },
  database_busy: { status: 503, description: 'The embedded database is held by another process that does not answer.', outside: 'cli' },
  deadline_passed: { status: 503, description: 'The request took longer than its deadline; nothing was changed.' },
  at_capacity: { status: 503, description: 'As many workspaces as the cap are running: your coach has been notified.' },
  allowlist_locked: { status: 503, description: 'The allowlist file is being edited by another process.' },
  imports_busy: { status: 503, description: 'The server is importing as many projects as it does at once.' },
  joins_busy: {
    status: 503,
    description: 'As many join codes were tried in the last minute as the server takes from everyone (120); Retry-After says when.',
    outside: 'pages',
  },
  import_interrupted: { status: 503, description: 'The server stopped during the import; nothing was changed.', outside: 'import' },
  import_unavailable: { status: 503, description: 'The host lacks a program importing needs (git, prlimit).' },
  home_unavailable: { status: 503, description: "The workspace's home cannot be read right now: the Docker Engine (or its swarm node) does not answer." },
  restore_backup_failed: { status: 503, description: 'The backup a restore makes of the files it replaces failed; nothing was restored.' },
  unavailable: { status: 503, description: 'Who may pass could not be looked up right now (host mode).' },
  try_again: { status: 503, description: 'Access rules changed while a WebSocket was connecting.', outside: 'proxy' },
  no_simulator: { status: 503, description: 'No simulator runs in this workspace: press Run first.', outside: 'proxy' },
  server_busy: { status: 503, description: 'The server holds as many connections as it can (PROXY_MAX_TUNNELS).', outside: 'proxy' },
  editor_not_running: { status: 503, description: "The workspace's editor is not running: open the workspace first.", outside: 'proxy' },
} as const satisfies Record<string, CodeEntry>;

/** A code of the catalogue. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The status of code `C`. */
export type StatusOf<C extends ErrorCode> = (typeof ERROR_CODES)[C]['status'];

/** Every status an error is given with. */
export type ErrorStatus = StatusOf<ErrorCode>;

/** The codes given with status `S`. */
export type CodeWithStatus<S extends ErrorStatus> = { [C in ErrorCode]: StatusOf<C> extends S ? C : never }[ErrorCode];
