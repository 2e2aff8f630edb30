#!/bin/sh
# Entrypoint of the classroom workspace image (/usr/local/bin/workspace-entrypoint).
#
# With no command (a workspace's code container): on a fresh, empty /home/student (a new volume)
# copy Debian's shell start-up files and the starter project in, then run code-server on
# 0.0.0.0:$EDITOR_PORT (default 8080), without a password (the control plane in front of it
# decides who gets through), showing /home/student.
#
# With a command (a simulator run: sh -c "$SIM_COMMAND"; or `docker run IMAGE java -version`):
# run it in /home/student, and nothing else: no code-server, and nothing is copied.
#
# It runs as the image's USER, uid 1000 (student). Started as root instead (docker run --user 0,
# e.g. to repair a volume that another tool wrote as root), it only gives /home/student and
# everything in it to uid 1000:1000, then drops to uid 1000 before anything else runs: nothing
# of the student's and no editor ever runs as root.
set -eu

home=/home/student
starter=/usr/local/share/classroom/starter
student=1000:1000

say() { printf 'workspace-entrypoint: %s\n' "$*" >&2; }

if [ "$(id -u)" = 0 ]; then
  if [ -d "$home" ]; then
    changed="$(find "$home" -xdev \( ! -uid 1000 -o ! -gid 1000 \) -print -exec chown -h "$student" {} + | wc -l)"
    [ "$changed" = 0 ] || say "gave $changed entries of $home to uid 1000 (student)"
  fi
  exec setpriv --reuid=1000 --regid=1000 --clear-groups -- "$0" "$@"
fi

export HOME="$home"

if [ "$#" -gt 0 ]; then
  cd "$home"
  exec "$@"
fi

# Empty: nothing in it, or only the lost+found of a freshly made file system, or only the lessons
# a coach handed out before the student first opened their workspace (the control plane writes them
# into a home that was never started: the starter project still belongs beside them).
home_is_empty() {
  [ -z "$(ls -A "$home" | grep -v -x -e 'lost+found' -e 'lessons' || true)" ]
}

if [ ! -w "$home" ]; then
  say "$home is not writable by uid $(id -u) (it belongs to $(stat -c %u:%g "$home")): give the volume to uid 1000, or start the container once with --user 0, which does"
  exit 1
fi

if home_is_empty; then
  # Copied as uid 1000, so everything copied belongs to the student.
  cp -R --preserve=mode,timestamps /etc/skel/. "$home/"
  cp -R --preserve=mode,timestamps "$starter/." "$home/"
  say "fresh home: copied the starter project into $home"
fi

# The editor's defaults of this image, for every home (new, old, an imported project alike): put in
# code-server's machine settings ("Remote" in the Settings editor) at every start, so that an image
# update reaches every home; the file's other settings (a derived image's) stay. A project's own
# .vscode/settings.json still overrides them. README.md says why these and why there.
machine_settings="$home/.local/share/code-server/Machine/settings.json"
mkdir -p "${machine_settings%/*}"
node - "$machine_settings" <<'MERGE' || say "left $machine_settings as it is: it is not plain JSON"
const fs = require('node:fs');
const file = process.argv[2];
const defaults = {
  'chat.disableAIFeatures': true,
  'terminal.integrated.initialHint': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'workbench.startupEditor': 'readme',
};
let settings = {};
try {
  if (fs.existsSync(file)) settings = JSON.parse(fs.readFileSync(file, 'utf8'));
} catch {
  process.exit(1);
}
fs.writeFileSync(file, `${JSON.stringify({ ...settings, ...defaults }, null, 2)}\n`);
MERGE

cd "$home"
# code-server lets $PORT override --bind-addr's port: EDITOR_PORT is the one setting here.
unset PORT
exec code-server \
  --auth none \
  --bind-addr "0.0.0.0:${EDITOR_PORT:-8080}" \
  --disable-telemetry \
  --disable-update-check \
  --disable-workspace-trust \
  "$home"
