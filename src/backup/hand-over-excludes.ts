/**
 * What stays behind when a coach hands one student's files over to another (a restore into a
 * different workspace): paths relative to the home directory, each excluding itself and everything
 * under it. Pass it as `exclude` to restoreBackup for such a restore; a restore into the same
 * workspace takes everything back.
 *
 * - The editor's session and state: `.local/share/code-server` holds open editors and workspace
 *   state, its secret storage (extension sign-ins), machine id, logs and the extensions that
 *   student installed; `.config/code-server` holds its config file (password, bind address). The
 *   receiving workspace's editor keeps its own.
 * - Credentials and keys, which are the first student's and must never reach another: SSH and GPG
 *   keys, git's credential stores, the GitHub CLI's token, `.netrc`, Docker's registry logins, npm
 *   and PyPI tokens, cloud and cluster credentials, the desktop keyring.
 * - Identity: `.gitconfig` (and git's XDG config) names the committer; the receiving student's
 *   commits must carry their own name.
 * - Shell and REPL histories: what was typed, pasted tokens included.
 *
 * Project files stay: credentials pasted into a project (a token in a repository's `.git/config`
 * remote URL, an `.env` file) travel with it, as the coach handed that project over.
 */
export const HAND_OVER_EXCLUDES: readonly string[] = Object.freeze([
  '.local/share/code-server',
  '.config/code-server',
  '.ssh',
  '.gnupg',
  '.git-credentials',
  '.config/git/credentials',
  '.config/gh',
  '.netrc',
  '.docker/config.json',
  '.npmrc',
  '.pypirc',
  '.aws',
  '.kube',
  '.local/share/keyrings',
  '.gitconfig',
  '.config/git/config',
  '.bash_history',
  '.ash_history',
  '.sh_history',
  '.zsh_history',
  '.python_history',
  '.node_repl_history',
  '.lesshst',
  '.viminfo',
]);
