#!/usr/bin/env bash
# Builds the workspace image students work in, classroom-workspace:latest (images/workspace/), from
# Debian's packages and npm alone: no container registry is needed. The standard build for a
# machine with a registry is images/workspace/Dockerfile; this script makes the same image here:
#
#   base     debootstrap --variant=minbase <suite> from this machine's configured Debian mirror,
#            then, in a chroot, the packages of images/workspace/packages (the JDK, git, bash, ...),
#            the user student (1000:1000) and an empty /home/student; apt's caches and lists,
#            manuals and documentation removed. Imported with `docker import`.
#   node +   the pinned Node (the npm package node-linux-<arch>: the official binary and its
#   code-    headers) and `npm install -g code-server@<pinned>` run on that Node, native modules
#   server   built against its headers on this machine (build tools installed here when missing,
#            never in the image), pruned of other platforms' binaries.
#   runtime  base + Node + code-server (a Dockerfile FROM the base image: COPY only).
#   extension the classroom's editor extension (images/workspace/extension), bundled here by its
#            build.mjs on the project's pinned Node with the project's packages (esbuild-wasm,
#            ntcore-ts-client), as the image classroom-workspace-stage:extension-<hash>: what the
#            Dockerfile's `extension` stage makes online.
#   image    the last stage of images/workspace/Dockerfile ("FROM runtime AS workspace" to the end:
#            the extension, entrypoint, classroom-gradle, WPILib stand-in, starter project, ENV,
#            USER 1000) built FROM the runtime image, its COPY --from=extension from the stage
#            above, tagged WORKSPACE_IMAGE_TAG (default classroom-workspace:latest).
#
# Versions (Node, code-server) and the Debian suite are the ARG defaults of that Dockerfile.
# The expensive parts are cached by the hash of their inputs, on disk under
# /var/cache/classroom-workspace (or WORKSPACE_IMAGE_CACHE: the Debian root, Node and
# code-server's tree; the two most recently used of each are kept) and as the images
# classroom-workspace-stage:{base,runtime}-<hash>, so that a rebuild after an edit of the
# entrypoint or the starter takes seconds. The image carries
# the label service.workspace-image-hash=<hash of all inputs>; when the tag already has it,
# nothing happens (well under a second, no output). Concurrent runs are serialised with flock.
# One line per phase; on failure one line (after the tail of the failing step's log).
#
# Settings: WORKSPACE_IMAGE_TAG, WORKSPACE_IMAGE_CACHE, WORKSPACE_DEBIAN_MIRROR (instead of the
# mirror of /etc/apt/sources.list*; also used for <suite>-updates), WORKSPACE_DEBIAN_SECURITY_MIRROR.
# Nothing else of the caller's environment reaches a build step (scripts/lib.sh, clean_environment).
# Building needs root (debootstrap, chroot) and, for the native modules, a Debian host of the same
# suite as the image; checking that the image is up to date needs neither.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-workspace-image
SELF="$ROOT/scripts/$(basename "$0")"
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$SELF" WORKSPACE_IMAGE_TAG WORKSPACE_IMAGE_CACHE WORKSPACE_DEBIAN_MIRROR WORKSPACE_DEBIAN_SECURITY_MIRROR

SRC="$ROOT/images/workspace"
TAG="${WORKSPACE_IMAGE_TAG:-classroom-workspace:latest}"
HASH_LABEL=service.workspace-image-hash
STAGE_REPO=classroom-workspace-stage

command -v docker >/dev/null 2>&1 || die "docker is missing: install Docker Engine (scripts/provision.sh does)"
[ -f "$SRC/Dockerfile" ] || die "$SRC/Dockerfile is missing"

# ---- inputs ------------------------------------------------------------------------------------
arg_default() { sed -n "s/^ARG $1=\([^[:space:]]*\).*/\1/p" "$SRC/Dockerfile" | head -n 1; }
NODE_VERSION="$(arg_default NODE_VERSION)"
CODE_SERVER_VERSION="$(arg_default CODE_SERVER_VERSION)"
BASE_IMAGE="$(arg_default BASE_IMAGE)"
SUITE="$(printf '%s' "$BASE_IMAGE" | sed -n 's/^debian:\([a-z]*\).*/\1/p')"
[ -n "$NODE_VERSION" ] && [ -n "$CODE_SERVER_VERSION" ] && [ -n "$SUITE" ] ||
  die "cannot read NODE_VERSION, CODE_SERVER_VERSION and a debian:<suite> BASE_IMAGE from $SRC/Dockerfile"
# The last stage of the Dockerfile, without its FROM line: this script builds it as it is.
FINAL_STAGE="$(sed -n '/^FROM runtime AS workspace$/,$p' "$SRC/Dockerfile" | tail -n +2)"
printf '%s\n' "$FINAL_STAGE" | grep -q '^ENTRYPOINT ' || die "no 'FROM runtime AS workspace' stage with an ENTRYPOINT in $SRC/Dockerfile"
printf '%s\n' "$FINAL_STAGE" | grep -q '^COPY --from=extension ' || die "the last stage of $SRC/Dockerfile does not COPY --from=extension"
NODE_BIN="$ROOT/node_modules/.bin/node"
[ -x "$NODE_BIN" ] || die "no Node in node_modules/.bin: run npm install first"

DEB_ARCH="$(dpkg --print-architecture 2>/dev/null || echo unknown)"
case "$DEB_ARCH" in
  amd64) NODE_ARCH=x64 ;;
  arm64) NODE_ARCH=arm64 ;;
  *) die "unsupported architecture $DEB_ARCH (Node's npm builds exist for amd64 and arm64)" ;;
esac

packages() { sed 's/#.*//' "$SRC/packages" | tr -s ' \t' '\n' | sed '/^$/d'; }

if [ -n "${WORKSPACE_DEBIAN_MIRROR:-}" ]; then
  MIRROR="$WORKSPACE_DEBIAN_MIRROR"
  UPDATES_MIRROR="$WORKSPACE_DEBIAN_MIRROR"
  SECURITY_MIRROR="${WORKSPACE_DEBIAN_SECURITY_MIRROR:-}"
else
  MIRROR="$(apt_uri_for "$SUITE")"
  UPDATES_MIRROR="$(apt_uri_for "$SUITE-updates")"
  SECURITY_MIRROR="${WORKSPACE_DEBIAN_SECURITY_MIRROR:-$(apt_uri_for "$SUITE-security")}"
fi
MIRROR="${MIRROR%/}"
[ -n "$MIRROR" ] || die "no Debian mirror for $SUITE in /etc/apt/sources.list*: set WORKSPACE_DEBIAN_MIRROR"
SOURCES_LIST="deb $MIRROR $SUITE main"
[ -z "$UPDATES_MIRROR" ] || SOURCES_LIST+=$'\n'"deb ${UPDATES_MIRROR%/} $SUITE-updates main"
[ -z "$SECURITY_MIRROR" ] || SOURCES_LIST+=$'\n'"deb ${SECURITY_MIRROR%/} $SUITE-security main"

HOST_OS="$(. /etc/os-release 2>/dev/null && echo "${ID:-?} ${VERSION_ID:-?} ${VERSION_CODENAME:-?}")"

# ---- the phases (their source text is part of their cache keys) ------------------------------

# build_base DIR: a Debian root with the image's packages, the user and an empty home.
build_base() {
  local r="$1" pkgs
  debootstrap --variant=minbase --arch="$DEB_ARCH" "$SUITE" "$r" "$MIRROR" >>"$LOG" 2>&1 ||
    fail "debootstrap $SUITE from $MIRROR failed"
  mount -t proc proc "$r/proc"
  MOUNTED="$r/proc"
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 0755 "$r/usr/sbin/policy-rc.d"
  cp "$SRC/dpkg-excludes" "$r/etc/dpkg/dpkg.cfg.d/classroom-excludes"
  printf '%s\n' "$SOURCES_LIST" >"$r/etc/apt/sources.list"
  apt-config dump 2>/dev/null | grep -i '^Acquire::[a-z]*::Proxy' >"$r/etc/apt/apt.conf.d/99classroom-build-proxy" || true
  pkgs="$(packages | tr '\n' ' ')"
  {
    chroot "$r" apt-get update -q &&
      chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkgs &&
      chroot "$r" groupadd --gid 1000 student &&
      chroot "$r" useradd --uid 1000 --gid 1000 --no-create-home --home-dir /home/student --shell /bin/bash student &&
      chroot "$r" apt-get clean
  } >>"$LOG" 2>&1 || fail "apt-get install in the $SUITE chroot failed"
  install -d -o 1000 -g 1000 -m 0755 "$r/home/student"
  umount "$r/proc"
  MOUNTED=""
  # What debootstrap installed before the dpkg filters were in place, and build leftovers.
  if [ -d "$r/usr/share/doc" ]; then
    find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  fi
  if [ -d "$r/usr/share/locale" ]; then find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +; fi
  rm -rf "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/lintian/* "$r"/usr/lib/jvm/*/jmods/*
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/*.deb \
    "$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old "$r"/var/log/* "$r"/tmp/* "$r"/var/tmp/* \
    "$r/usr/sbin/policy-rc.d" "$r/etc/apt/apt.conf.d/99classroom-build-proxy"
  : >"$r/etc/resolv.conf"
  echo workspace >"$r/etc/hostname"
}

# build_code_server DIR: DIR/node (the pinned Node, with headers) and DIR/code-server (its
# install tree, native modules built against those headers, pruned).
build_code_server() {
  local out="$1" deps=(build-essential python3 pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev) missing=() p tgz
  command -v npm >/dev/null 2>&1 || fail "npm is missing on this machine (Debian package npm, or Node.js with npm)"
  [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = "$SUITE" ] ||
    fail "code-server's native modules are built on this machine, so it must run Debian $SUITE like the image (it runs $HOST_OS); elsewhere use images/workspace/Dockerfile"
  for p in "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; } >>"$LOG" 2>&1 ||
      fail "installing the build tools (${missing[*]}) on this machine failed"
  fi
  mkdir -p "$out/node" "$WORK/pack" "$WORK/home"
  tgz="$(cd "$WORK/pack" && npm pack --silent "node-linux-$NODE_ARCH@$NODE_VERSION" 2>>"$LOG" | tail -n 1)" ||
    fail "npm pack node-linux-$NODE_ARCH@$NODE_VERSION failed"
  tar -xzf "$WORK/pack/$tgz" -C "$out/node" --strip-components=1
  [ "$("$out/node/bin/node" --version)" = "v$NODE_VERSION" ] || fail "node-linux-$NODE_ARCH@$NODE_VERSION did not give Node $NODE_VERSION"
  # npm itself runs on this Node, so code-server's postinstall sees Node 24 (it reads npm's user
  # agent) and node-gyp builds against the headers next to it.
  npm_install_global "$out/node" "$WORK/prefix" "code-server@$CODE_SERVER_VERSION" "$LOG" ||
    fail "npm install -g code-server@$CODE_SERVER_VERSION failed"
  mv "$WORK/prefix/lib/node_modules/code-server" "$out/code-server"
  sh "$SRC/prune-code-server.sh" "$out/code-server" >>"$LOG" 2>&1 || fail "pruning code-server's tree failed"
  HOME="$WORK/home" "$out/node/bin/node" "$out/code-server/out/node/entry.js" --version 2>>"$LOG" | grep -q "^$CODE_SERVER_VERSION " ||
    fail "the installed code-server does not start (code-server --version)"
  # Only bin/node goes into the image; the headers were for the build.
  rm -rf "$out/node/include" "$out/node/share" "$out/node/CHANGELOG.md"
}

# The checks run in the runtime image: every library that Node and code-server's native modules
# link against is there (but for the Microsoft sign-in broker, which is never loaded offline), the
# native modules load in this Node (built for its ABI), and code-server starts as the student.
RUNTIME_CHECK='
  set -u; bad=0
  for f in /usr/local/bin/node $(find /usr/local/lib/code-server -name "*.node" ! -path "*/microsoft-authentication/*"); do
    if ldd "$f" 2>&1 | grep -q "not found"; then echo "$f: $(ldd "$f" 2>&1 | grep "not found" | tr -s " \t\n" " ")"; bad=1; fi
  done
  [ "$bad" = 0 ] || exit 1
  cd /tmp
  setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/tmp node -e "
    const vscode = \"/usr/local/lib/code-server/lib/vscode\";
    for (const m of [\"node-pty\", \"@vscode/spdlog\", \"@vscode/sqlite3\", \"@parcel/watcher\", \"kerberos\", \"@vscode/native-watchdog\"])
      require(require.resolve(m, { paths: [vscode] }));" || exit 1
  setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/tmp code-server --version'

# ---- keys --------------------------------------------------------------------------------------
BASE_KEY="$({
  echo "base $SUITE $DEB_ARCH"
  printf '%s\n' "$SOURCES_LIST"
  packages
  grep -v -e '^#' -e '^[[:space:]]*$' "$SRC/dpkg-excludes"
  declare -f build_base
} | hash16)"
CS_KEY="$({
  echo "code-server $CODE_SERVER_VERSION node $NODE_VERSION $NODE_ARCH host $HOST_OS"
  cat "$SRC/prune-code-server.sh"
  declare -f build_code_server npm_install_global npm_config
} | hash16)"
# The extension: its sources, its builder and the versions of the packages it is bundled with.
EXT_SRC="$SRC/extension"
EXT_KEY="$({
  echo "extension"
  tree_hash "$EXT_SRC/src"
  for f in package.json build.mjs README.md; do sha256sum <"$EXT_SRC/$f"; done
  for p in esbuild-wasm ntcore-ts-client @msgpack/msgpack zod; do sed -n 's/^  "version": "\(.*\)",$/\1/p' "$ROOT/node_modules/$p/package.json"; done
} | hash16)"
RUNTIME_DOCKERFILE="FROM $STAGE_REPO:base-$BASE_KEY
COPY usr /usr"
RUNTIME_KEY="$({
  echo "runtime $BASE_KEY $CS_KEY"
  printf '%s\n' "$RUNTIME_DOCKERFILE" "$RUNTIME_CHECK"
} | hash16)"
FINAL_DOCKERFILE="FROM $STAGE_REPO:runtime-$RUNTIME_KEY
${FINAL_STAGE//--from=extension /--from=$STAGE_REPO:extension-$EXT_KEY }"
HASH="$({
  echo "image $RUNTIME_KEY"
  printf '%s\n' "$FINAL_DOCKERFILE"
  for f in entrypoint.sh classroom-gradle; do printf '%s %s\n' "$(stat -c %a "$SRC/$f")" "$(sha256sum <"$SRC/$f")"; done
  tree_hash "$SRC/wpilib-standin"
  tree_hash "$SRC/starter"
  cat "$SELF" "$ROOT/scripts/lib.sh" | sha256sum
} | hash16)"

# ---- up to date? -------------------------------------------------------------------------------
up_to_date() { image_up_to_date "$HASH_LABEL" "$TAG" "$HASH" retag; }
docker info >/dev/null 2>&1 || die "Docker Engine does not answer: start dockerd (scripts/provision.sh does)"
up_to_date && exit 0

[ "$(id -u)" = 0 ] || die "$TAG needs building, which needs root (debootstrap, chroot, apt): run this script as root"
CACHE="${WORKSPACE_IMAGE_CACHE:-/var/cache/classroom-workspace}"
# Serialise concurrent builds; re-check once holding the lock.
lock_cache
up_to_date && exit 0
clear_leftovers

start_ms=$(now_ms)
start_work
stage_exists() { docker image inspect "$STAGE_REPO:$1" >/dev/null 2>&1; }

say "building $TAG (inputs $HASH)"

if ! stage_exists "runtime-$RUNTIME_KEY"; then
  # Node and code-server, cached on disk.
  CS_DIR="$CACHE/code-server-$CS_KEY"
  if [ ! -f "$CS_DIR/.complete" ]; then
    t=$(now_ms)
    rm -rf "$CS_DIR"
    build_code_server "$WORK/code-server"
    touch "$WORK/code-server/.complete"
    mv "$WORK/code-server" "$CS_DIR"
    say "node $NODE_VERSION + code-server $CODE_SERVER_VERSION: npm-installed and built in $(since "$t") ($(du -sm "$CS_DIR" | cut -f1) MB, cached in $CS_DIR)"
  fi
  touch "$CS_DIR"

  # The Debian root, cached on disk, and its image.
  BASE_DIR="$CACHE/base-$BASE_KEY"
  if ! stage_exists "base-$BASE_KEY"; then
    if [ ! -f "$BASE_DIR.complete" ]; then
      t=$(now_ms)
      rm -rf "$BASE_DIR"
      command -v debootstrap >/dev/null 2>&1 || {
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; } >>"$LOG" 2>&1 || fail "installing debootstrap failed"
      }
      build_base "$WORK/base"
      mv "$WORK/base" "$BASE_DIR"
      touch "$BASE_DIR.complete"
      say "base: debootstrap $SUITE from $MIRROR and $(packages | wc -l) packages in $(since "$t") ($(du -sm "$BASE_DIR" | cut -f1) MB, cached in $BASE_DIR)"
    fi
    t=$(now_ms)
    tar --numeric-owner -C "$BASE_DIR" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
      docker import - "$STAGE_REPO:base-$BASE_KEY" >>"$LOG" 2>&1 ||
      fail "docker import of the base root failed"
    say "base image: imported in $(since "$t")"
  fi
  if [ -d "$BASE_DIR" ]; then touch "$BASE_DIR.complete"; fi

  # Runtime: base + Node + code-server.
  t=$(now_ms)
  CTX="$WORK/runtime"
  mkdir -p "$CTX/usr/local/bin" "$CTX/usr/local/lib"
  cp -al "$CS_DIR/node/bin/node" "$CTX/usr/local/bin/node" 2>/dev/null || cp -a "$CS_DIR/node/bin/node" "$CTX/usr/local/bin/node"
  cp -al "$CS_DIR/code-server" "$CTX/usr/local/lib/code-server" 2>/dev/null || cp -a "$CS_DIR/code-server" "$CTX/usr/local/lib/code-server"
  ln -s ../lib/code-server/out/node/entry.js "$CTX/usr/local/bin/code-server"
  printf '%s\n' "$RUNTIME_DOCKERFILE" >"$CTX/Dockerfile"
  DOCKER_BUILDKIT=0 docker build --force-rm -q -t "$STAGE_REPO:runtime-$RUNTIME_KEY" "$CTX" >>"$LOG" 2>&1 ||
    fail "docker build of the runtime image failed"
  if ! docker run --rm --network none --user 0 --entrypoint /bin/sh "$STAGE_REPO:runtime-$RUNTIME_KEY" -c "$RUNTIME_CHECK" >>"$LOG" 2>&1; then
    docker rmi "$STAGE_REPO:runtime-$RUNTIME_KEY" >/dev/null 2>&1 || true
    fail "the runtime image lacks libraries for Node or code-server, or code-server does not start in it"
  fi
  rm -rf "$CTX"
  say "runtime image: Node and code-server added in $(since "$t")"
fi
touch "$CACHE/runtime-$RUNTIME_KEY.used"

# The classroom extension, bundled here: what the Dockerfile's `extension` stage makes online.
if ! stage_exists "extension-$EXT_KEY"; then
  t=$(now_ms)
  mkdir -p "$WORK/extension/opt"
  (cd "$EXT_SRC" && "$(readlink -f "$NODE_BIN")" build.mjs "$WORK/extension/opt/classroom-extension") >>"$LOG" 2>&1 ||
    fail "bundling the classroom extension failed"
  printf 'FROM scratch\nCOPY opt /opt\n' >"$WORK/extension/Dockerfile"
  DOCKER_BUILDKIT=0 docker build --force-rm -q -t "$STAGE_REPO:extension-$EXT_KEY" "$WORK/extension" >>"$LOG" 2>&1 ||
    fail "docker build of the extension stage failed"
  say "extension: bundled in $(since "$t")"
fi

# The image: the last stage of images/workspace/Dockerfile on the runtime image.
t=$(now_ms)
printf '%s\n' "$FINAL_DOCKERFILE" >"$WORK/Dockerfile"
old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
# No buildx on these machines: the classic builder (DOCKER_BUILDKIT=0) needs nothing else.
DOCKER_BUILDKIT=0 docker build --force-rm -q --label "$HASH_LABEL=$HASH" -f "$WORK/Dockerfile" -t "$TAG" "$SRC" >>"$LOG" 2>&1 ||
  fail "docker build of $TAG failed"
replace_tag "$TAG" "$old_id"

# Keep the two most recently used cache entries of each kind; drop stage images whose entry is gone.
prune_cache() {
  local kind="$1" suffix="$2"
  { ls -1dt "$CACHE/$kind-"*"$suffix" 2>/dev/null || true; } | tail -n +3 | while read -r entry; do
    rm -rf "$entry" "${entry%.complete}"
  done
}
prune_cache code-server ""
prune_cache base .complete
prune_cache runtime .used
docker images "$STAGE_REPO" --format '{{.Tag}}' | while read -r key; do
  case "$key" in
    base-*) [ -f "$CACHE/$key.complete" ] || docker rmi "$STAGE_REPO:$key" >/dev/null 2>&1 || true ;;
    runtime-*) [ -f "$CACHE/$key.used" ] || docker rmi "$STAGE_REPO:$key" >/dev/null 2>&1 || true ;;
    extension-*) [ "$key" = "extension-$EXT_KEY" ] || docker rmi "$STAGE_REPO:$key" >/dev/null 2>&1 || true ;;
  esac
done

say "built $TAG ($(image_size_mb "$TAG") MB) in $(since "$start_ms")"
