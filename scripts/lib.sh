# The helpers every script under scripts/ shares; sourced, never run. Before sourcing, a script sets
# SCRIPT (the name its lines begin with). The image builders also set CACHE (their cache directory)
# and LOG (the log of the step under way) once they start building.
#
# Environment: a build step never runs with the environment of whoever called the script. Under
# `npm test`, npm exports its own configuration (npm_config_user_agent naming the Node that runs
# npm, npm_config_* of every kind), NODE_OPTIONS may be set, and PATH starts with node_modules/.bin
# directories: an npm or Node started by a build step would take all of that as its own. So each
# build script calls clean_environment first, which runs the script again with only what is listed
# there; a step that needs more (a pinned Node first on PATH) sets it on the command.

# What a build step may keep of its caller's environment: where it is (HOME, TMPDIR), how to reach
# the network and whom to trust there (proxies, extra CA certificates), which Docker Engine to use.
# Nothing that configures npm or Node's behaviour.
BUILD_ENV_KEEP=(HOME TMPDIR TERM LANG LC_ALL TZ
  http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY
  NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR
  DOCKER_HOST DOCKER_CONFIG DOCKER_CERT_PATH DOCKER_TLS_VERIFY DOCKER_CONTEXT)
# The system's directories, and that of the machine's own npm (never a node_modules/.bin).
BUILD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf '%s: %s\n' "$SCRIPT" "$*"; }
SAID_WHY=0
die() {
  say "$*" >&2
  SAID_WHY=1
  exit 1
}

# machine_npm_dir: the directory of the first npm on PATH that is not a project's (node_modules)
# nor npm's own script shims: the npm this machine has installed. Empty when there is none.
machine_npm_dir() {
  local dir
  local IFS=:
  for dir in $PATH; do
    case "$dir" in */node_modules/* | */node-gyp-bin) continue ;; esac
    if [ -x "$dir/npm" ]; then
      printf '%s\n' "$dir"
      return
    fi
  done
}

# clean_environment SCRIPT_PATH [NAME...]: unless already done, runs SCRIPT_PATH again (exec: this
# process ends there) with BUILD_ENV_KEEP, the NAMEs the script documents as its settings, the
# machine's npm on a system PATH, and nothing else. Call it before anything else in a build script.
clean_environment() {
  [ "${CLASSROOM_BUILD_ENV:-}" = clean ] && return 0
  local script="$1" name npm_dir
  shift
  local keep=(CLASSROOM_BUILD_ENV=clean)
  for name in "${BUILD_ENV_KEEP[@]}" "$@"; do
    if [ -n "${!name+set}" ]; then keep+=("$name=${!name}"); fi
  done
  npm_dir="$(machine_npm_dir)"
  exec env -i "${keep[@]}" "PATH=$BUILD_PATH${npm_dir:+:$npm_dir}" bash "$script"
}

# npm_config SETTING: the value of an npm setting as the machine's own npm has it (its user and
# global npmrc files: a school's registry mirror, its CA file). Empty when unset or when npm cannot say.
npm_config() {
  local value
  value="$(npm config get "$1" 2>/dev/null)" || return 0
  [ "$value" = undefined ] || [ "$value" = null ] || printf '%s\n' "$value"
}

# npm_install_global NODE_DIR PREFIX PACKAGE LOG: `npm install --global PACKAGE` into PREFIX, npm
# itself and every install script running on the Node of NODE_DIR (its bin/node first on PATH, and
# its headers for native modules), so that they see that Node, its version in npm's user agent too.
# Needs clean_environment first. The registry and CA file are the machine npm's own settings; its
# other settings (~/.npmrc) are left out. Output goes to LOG; returns npm's status.
npm_install_global() {
  local node_dir="$1" prefix="$2" package="$3" log="$4" home setting value
  local settings=(npm_config_nodedir="$node_dir" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false)
  for setting in registry cafile; do
    value="$(npm_config "$setting")"
    if [ -n "$value" ]; then settings+=("npm_config_$setting=$value"); fi
  done
  home="$(mktemp -d "${TMPDIR:-/tmp}/npm-home.XXXXXX")"
  local status=0
  env PATH="$node_dir/bin:$PATH" HOME="$home" "${settings[@]}" npm install --global --prefix "$prefix" --loglevel=warn "$package" >>"$log" 2>&1 || status=$?
  rm -rf "$home"
  return "$status"
}

# now_ms: milliseconds since the epoch. since MS: the time since MS, as "12.3 s".
now_ms() { echo $(($(date +%s%N) / 1000000)); }
since() {
  local ms=$(($(now_ms) - $1))
  printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100))
}

hash16() { sha256sum | cut -c1-16; }

# tree_hash DIR: every file and link under DIR with its mode, and every file's sha256: what a
# cache key holds of a directory of inputs.
tree_hash() { (cd "$1" && find . \( -type f -o -type l \) -printf '%m %p\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); }

# image_hash LABEL TAG: the value of LABEL on image TAG (empty when there is no such image).
image_hash() { docker image inspect --format "{{ index .Config.Labels \"$1\" }}" "$2" 2>/dev/null || true; }

# image_up_to_date LABEL TAG HASH [retag]: TAG carries LABEL=HASH. With retag, an image built
# before with that label, which the tag has since left, gets the tag back (only for images that
# nothing is built FROM: those would carry the label too).
image_up_to_date() {
  [ "$(image_hash "$1" "$2")" = "$3" ] && return 0
  [ "${4:-}" = retag ] || return 1
  local id
  id="$(docker images -q --filter "label=$1=$3" | head -n 1)"
  [ -n "$id" ] && docker tag "$id" "$2"
}

# replace_tag TAG OLD_ID: after a build of TAG, removes the image TAG pointed at before (OLD_ID)
# when it is another one; fails harmlessly while a container still uses it.
replace_tag() {
  local new
  new="$(docker image inspect --format '{{.Id}}' "$1")"
  if [ -n "$2" ] && [ "$2" != "$new" ]; then docker rmi "$2" >/dev/null 2>&1 || true; fi
}

# image_size_mb TAG
image_size_mb() { echo $(($(docker image inspect --format '{{.Size}}' "$1") / 1000000)); }

# lock_cache: serialises builds on CACHE (flock on CACHE/.lock, held until the script ends) and
# removes what a killed build left there (its tmp.* directories, with any /proc still mounted).
lock_cache() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  flock 9
}
clear_leftovers() {
  local old m
  for old in "$CACHE"/tmp.*; do
    [ -d "$old" ] || continue
    for m in "$old"/*/proc; do if mountpoint -q "$m" 2>/dev/null; then umount "$m" || umount -l "$m" || true; fi; done
    rm -rf "$old"
  done
}

# start_work: WORK (a fresh directory under CACHE, removed at exit), LOG in it, and the exit trap
# that unmounts what is still mounted (MOUNTED) and, on a failure not yet explained, says where
# the log is.
start_work() {
  WORK="$(mktemp -d "$CACHE/tmp.XXXXXX")"
  LOG="$WORK/build.log"
  : >"$LOG"
  MOUNTED=""
  trap cleanup EXIT
}
cleanup() {
  local rc=$?
  if [ -n "$MOUNTED" ]; then umount "$MOUNTED" 2>/dev/null || umount -l "$MOUNTED" 2>/dev/null || true; fi
  if [ "$rc" != 0 ] && [ "$SAID_WHY" = 0 ]; then
    cp "$LOG" "$CACHE/last-failure.log" 2>/dev/null || true
    say "the build stopped (exit code $rc; log: $CACHE/last-failure.log)" >&2
  fi
  rm -rf "$WORK"
}

# fail MESSAGE: the tail of LOG, then MESSAGE and where the whole log is kept; exits.
fail() {
  cp "$LOG" "$CACHE/last-failure.log" 2>/dev/null || true
  if [ -s "$LOG" ]; then tail -n 25 "$LOG" | sed 's/^/  | /' >&2; fi
  die "$* (log: $CACHE/last-failure.log)"
}

# need_root WHAT HOW: exits saying to run as root, or to install WHAT (HOW) by hand, unless root.
need_root() {
  if [ "$(id -u)" != 0 ]; then
    say "$1 is missing and installing it needs root: run as root, or install it ($2) and start it yourself"
    exit 1
  fi
}

# provision_docker: a Docker Engine that answers: installs it (Debian's docker.io) and starts dockerd
# (log: DOCKERD_LOG, default /var/log/dockerd.log) when needed.
provision_docker() {
  if docker info >/dev/null 2>&1; then return; fi
  if ! command -v dockerd >/dev/null 2>&1; then
    need_root "Docker Engine" "Debian package docker.io"
    say "installing Docker Engine"
    apt_install docker.io
  fi
  if ! pgrep -x dockerd >/dev/null; then
    need_root "a running Docker Engine" "start dockerd"
    say "starting dockerd (log: ${DOCKERD_LOG:-/var/log/dockerd.log})"
    nohup dockerd >"${DOCKERD_LOG:-/var/log/dockerd.log}" 2>&1 &
  fi
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return
    sleep 0.5
  done
  say "dockerd did not answer within 30 s; see ${DOCKERD_LOG:-/var/log/dockerd.log}"
  exit 1
}

# apt_install PACKAGE...: installs from Debian's packages, quietly (apt's lists updated once).
APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" = 0 ]; then
    apt-get update -qq
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq "$@" >/dev/null
}

# apt_uri_for SUITE: the first URI that serves SUITE (exactly) in this machine's apt sources,
# one-line or deb822 (read from the files: apt's lists need not have been fetched yet).
apt_uri_for() {
  {
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | sed 's/#.*//' |
      awk -v s="$1" '$1 == "deb" { sub(/\[[^]]*\][ \t]*/, ""); if ($3 == s) print $2 }'
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v s="$1" 'BEGIN { RS = ""; FS = "\n" }
        { uris = ""; suites = ""; types = ""; enabled = "yes"
          for (i = 1; i <= NF; i++) {
            line = $i; if (line ~ /^[ \t]*#/) continue
            key = tolower(substr(line, 1, index(line, ":") - 1)); val = substr(line, index(line, ":") + 1)
            gsub(/^[ \t]+|[ \t]+$/, "", val)
            if (key == "uris") uris = val; else if (key == "suites") suites = val
            else if (key == "types") types = val; else if (key == "enabled") enabled = tolower(val)
          }
          if (enabled == "no" || types !~ /(^|[ \t])deb([ \t]|$)/) next
          n = split(suites, ss, /[ \t]+/)
          for (j = 1; j <= n; j++) if (ss[j] == s) { split(uris, us, /[ \t]+/); print us[1] }
        }' "$f"
    done
  } | head -n 1
}
