/**
 * The clone of an import: git on the control plane's host (never in a student's container), boxed
 * in: https only, no redirect followed, the connection pinned to the addresses already checked, no
 * configuration, credentials, prompts, hooks or templates of the host's, at most IMPORT_MAX_SIZE on
 * disk, killed at the import's time limit.
 */
import { spawn } from 'node:child_process';
import { lstat, mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { AppError, NotFoundError, ValidationError } from '../errors.ts';
import type { CheckedUrl } from './address.ts';

/** How often the clone's size on disk is measured while git runs. */
const WATCH_MS = 200;

/** The most of git's error output kept (what a failure is told from). */
const MAX_STDERR = 64 * 1024;

/** Where git and prlimit are looked for (only src/config.ts reads the environment: the PATH is fixed). */
const PATH = '/usr/local/bin:/usr/bin:/bin';

export interface CloneOptions {
  /** The repository's address, after discovery (no redirect left), and the addresses it may connect to. */
  checked: CheckedUrl;
  /** The branch to take; undefined: the repository's default branch. */
  branch: string | undefined;
  /** Where the clone goes (must not exist yet; its parent must). */
  dir: string;
  /** An empty directory that is git's HOME (nothing of the host user's is read). */
  home: string;
  /** IMPORT_MAX_SIZE: the most the clone may put on disk. */
  maxBytes: number;
  /** IMPORT_CA_FILE: the authorities git trusts instead of the system's. */
  caFile: string | undefined;
  /** The import's time limit: aborting it kills git. */
  signal: AbortSignal;
  /** Told the clone's size on disk as it grows. */
  onBytes: (bytes: number) => void;
}

/** The size of everything under `dir` (files and links; what vanished meanwhile does not count), 0 when it is not there. */
export async function sizeOnDisk(dir: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir, { recursive: true });
  } catch {
    return 0;
  }
  let bytes = 0;
  for (const name of names)
    bytes += await lstat(path.join(dir, name)).then(
      (info) => (info.isDirectory() ? 0 : info.size),
      () => 0,
    );
  return bytes;
}

/** git's `-c` settings for the clone: each closes a way out (see the module's comment and docs/security.md). */
function gitSettings(options: CloneOptions): string[] {
  const { checked } = options;
  const settings = [
    'protocol.allow=never',
    'protocol.https.allow=always',
    'http.followRedirects=false',
    'http.sslVerify=true',
    'credential.helper=',
    'core.hooksPath=/dev/null',
    'core.symlinks=true',
    'transfer.fsckObjects=true',
    'submodule.recurse=false',
  ];
  // The connection goes to the addresses checked, whatever DNS says now (a name that changes its answer: DNS rebinding).
  if (checked.addresses.length > 0 && !checked.addresses.includes(checked.host)) {
    const addresses = checked.addresses.map((address) => (address.includes(':') ? `[${address}]` : address)).join(',');
    settings.push(`http.curloptResolve=${checked.host}:${checked.port}:${addresses}`);
  }
  if (options.caFile) settings.push(`http.sslCAInfo=${options.caFile}`);
  return settings.flatMap((setting) => ['-c', setting]);
}

/** The environment of every git the import runs: nothing of the server's (no proxy, no credentials), no prompt, no configuration file. */
function gitEnvironment(home: string): Record<string, string> {
  return {
    PATH,
    HOME: home,
    XDG_CONFIG_HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_ALLOW_PROTOCOL: 'https',
    GIT_PROTOCOL_FROM_USER: '0',
    LC_ALL: 'C',
  };
}

/** Runs a program in its own process group (so that a kill reaches git's helpers too); resolves with its exit and error output. */
function runBoxed(
  command: string,
  args: string[],
  options: { env: Record<string, string>; cwd?: string; signal: AbortSignal; onSpawn?: (kill: () => void) => void },
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env, cwd: options.cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const kill = () => {
      if (child.pid !== undefined && child.exitCode === null) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    };
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-MAX_STDERR)));
    child.stdout.on('data', (chunk: Buffer) => (stdout = (stdout + chunk.toString()).slice(-MAX_STDERR)));
    options.signal.addEventListener('abort', kill, { once: true });
    child.on('error', (error) => {
      options.signal.removeEventListener('abort', kill);
      reject(error);
    });
    child.on('close', (code) => {
      options.signal.removeEventListener('abort', kill);
      resolve({ code, stderr, stdout });
    });
    options.onSpawn?.(kill);
  });
}

/** A program of the import missing on the host: 503, naming it. */
const missing = (program: string) =>
  new AppError('import_unavailable', `Importing needs ${program} on the control plane's host, and it is not installed there: ask your coach.`);

/**
 * What a failed clone's error output says, as the student's error: a branch or repository that is
 * not there, a redirect or sign-in git was asked for, a server that could not be reached.
 */
function cloneFailure(stderr: string, options: CloneOptions): AppError {
  const url = options.checked.url;
  if (/Remote branch .* not found in upstream/.test(stderr)) {
    return NotFoundError('import_branch_not_found', `The repository ${url} has no branch ${JSON.stringify(options.branch)}.`);
  }
  if (/repository '.*' not found|returned error: 40[134]/.test(stderr)) {
    return NotFoundError('import_repository_not_found', `There is no public repository at ${url} (a private repository cannot be imported).`);
  }
  if (/returned error: 30\d/.test(stderr)) {
    return ValidationError('import_redirect_invalid', `${url} redirected git elsewhere than it redirected the check; give the repository's own address.`);
  }
  const last =
    stderr
      .trim()
      .split('\n')
      .at(-1)
      ?.replace(/^fatal: /, '')
      .slice(0, 300) ?? '';
  return new AppError('import_unreachable', `The clone of ${url} failed: ${last || 'git gave no reason'}.`);
}

/**
 * Clones `options.checked.url` (one branch, its last commit only, no tags) into `options.dir`:
 * `git clone --depth 1 --single-branch --no-tags`, run under `prlimit --fsize` (no file it writes,
 * the received pack included, may pass IMPORT_MAX_SIZE: the write fails, "File too large") with its size on disk measured every 200 ms
 * and git killed once the whole passes IMPORT_MAX_SIZE, and killed when `signal` aborts. Answers the
 * commit taken and the clone's size. Throws 413 `import_too_large`, the signal's reason (the time
 * limit), 404 `import_branch_not_found` or `import_repository_not_found`, 400 `import_empty` (no
 * commit), 400 `import_redirect_invalid`, 502 `import_unreachable`, 503 `import_unavailable` (no git
 * or prlimit on the host). A failed clone's directory is left for the caller to remove.
 */
export async function cloneRepository(options: CloneOptions): Promise<{ commit: string; bytes: number }> {
  const env = gitEnvironment(options.home);
  await mkdir(options.home, { recursive: true });
  const tooLarge = () =>
    new AppError(
      'import_too_large',
      `The repository is larger than ${Math.round(options.maxBytes / 1024 / 1024)} MB (its last commit alone): import a smaller one, or a subfolder of it from a smaller repository.`,
    );
  let over = false;
  let watching = true;
  let kill: () => void = () => undefined;
  const watch = async () => {
    while (watching) {
      const bytes = await sizeOnDisk(options.dir);
      options.onBytes(bytes);
      if (bytes > options.maxBytes) {
        over = true;
        kill();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, WATCH_MS));
    }
  };
  const args = [
    `--fsize=${options.maxBytes}`,
    '--',
    'git',
    ...gitSettings(options),
    'clone',
    '--quiet',
    '--depth',
    '1',
    '--single-branch',
    '--no-tags',
    '--template=',
  ];
  if (options.branch !== undefined) args.push('--branch', options.branch);
  args.push('--', options.checked.url, options.dir);
  let watcher: Promise<void> | undefined;
  // SIGXFSZ ignored (inherited through exec): a write past the bound fails with EFBIG, which git reports, rather than killing it unheard.
  const result = await runBoxed('sh', ['-c', 'trap "" XFSZ; exec "$@"', 'import', 'prlimit', ...args], {
    env,
    signal: options.signal,
    onSpawn: (killer) => {
      kill = killer;
      watcher = watch();
    },
  }).finally(() => (watching = false));
  await watcher;
  if (options.signal.aborted) throw options.signal.reason;
  const bytes = await sizeOnDisk(options.dir);
  options.onBytes(bytes);
  // Past the bound: seen by the watch, or a file stopped at it by the kernel (git then fails, saying so).
  if (over || bytes > options.maxBytes || /File too large/.test(result.stderr)) throw tooLarge();
  if (result.code === 127) throw missing(/failed to execute git/.test(result.stderr) ? 'git' : 'prlimit (util-linux)');
  if (result.code !== 0) throw cloneFailure(result.stderr, options);
  const head = await runBoxed('git', ['rev-parse', '--verify', '--quiet', 'HEAD'], { env, cwd: options.dir, signal: options.signal });
  if (head.code !== 0) throw ValidationError('import_empty', `The repository ${options.checked.url} has no commits yet: there is nothing to import.`);
  return { commit: head.stdout.trim(), bytes };
}
