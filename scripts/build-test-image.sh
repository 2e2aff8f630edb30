#!/usr/bin/env bash
# Builds the test workspace image classroom-workspace:test (test/fixtures/workspace) FROM scratch:
# the project's pinned Node binary with the shared libraries ldd names for it and the loader,
# a static busybox (sh, sleep, cat, ls, ...), the ws package and the stand-in editor/simulator.
# Idempotent: the image carries the label service.test-image-hash=<hash of the build inputs>;
# when the tag already has the current hash nothing happens (well under a second, no output).
# Settings: TEST_IMAGE_TAG; nothing else of the caller's environment reaches a build step.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-test-image
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$ROOT/scripts/$(basename "$0")" TEST_IMAGE_TAG

TAG="${TEST_IMAGE_TAG:-classroom-workspace:test}"
FIXTURE="$ROOT/test/fixtures/workspace"
HASH_LABEL=service.test-image-hash

[ -x "$ROOT/node_modules/.bin/node" ] || die "no Node in node_modules/.bin: run npm install first"
NODE_BIN="$(readlink -f "$ROOT/node_modules/.bin/node")"
WS_DIR="$ROOT/node_modules/ws"
[ -f "$WS_DIR/package.json" ] || die "the ws package is missing from node_modules: run npm install first"
MSGPACK_DIR="$ROOT/node_modules/@msgpack/msgpack"
[ -f "$MSGPACK_DIR/package.json" ] || die "the @msgpack/msgpack package is missing from node_modules: run npm install first"

# busybox must be static (the Debian package busybox is dynamic, busybox-static is not).
busybox_ok() { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; }
if ! busybox_ok; then
  [ "$(id -u)" = 0 ] || die "a static /bin/busybox is missing: install the Debian package busybox-static"
  say "installing busybox-static"
  apt_install busybox-static
  busybox_ok || die "busybox-static did not provide a static /bin/busybox"
fi

# The shared objects the Node binary needs (absolute paths as ldd names them, loader included).
mapfile -t LIBS < <(ldd "$NODE_BIN" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }')
[ "${#LIBS[@]}" -gt 0 ] || die "ldd named no libraries for $NODE_BIN"

input_hash() {
  {
    # The binary by its content (CRC and size), not its path: every clone of the project has its own path.
    echo "node $("$NODE_BIN" --version) $(cksum <"$NODE_BIN")"
    for lib in "${LIBS[@]}"; do echo "lib $lib $(readlink -f "$lib")"; done
    (cd "$FIXTURE" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    cat "$0" "$ROOT/scripts/lib.sh" | sha256sum | cut -d' ' -f1
    sha256sum "$WS_DIR/package.json" "$MSGPACK_DIR/package.json" | cut -d' ' -f1
    sha256sum /bin/busybox | cut -d' ' -f1
  } | sha256sum | cut -c1-16
}
HASH="$(input_hash)"

up_to_date() { image_up_to_date "$HASH_LABEL" "$TAG" "$HASH" retag; }
up_to_date && exit 0

# Serialise concurrent builds (two test runs at once); re-check once holding the lock.
if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/classroom-workspace-test-image.lock"
  flock 9
  up_to_date && exit 0
fi

start_ms=$(now_ms)
say "building $TAG (inputs $HASH)"
CTX="$(mktemp -d "${TMPDIR:-/tmp}/classroom-workspace-test-image.XXXXXX")"
trap 'rm -rf "$CTX"' EXIT
R="$CTX/rootfs"
mkdir -p "$R/usr/local/bin" "$R/bin" "$R/etc" "$R/app/node_modules/@msgpack" "$R/home/student" "$R/tmp"
cp -l "$NODE_BIN" "$R/usr/local/bin/node" 2>/dev/null || cp "$NODE_BIN" "$R/usr/local/bin/node"
for lib in "${LIBS[@]}"; do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
cp /bin/busybox "$R/bin/busybox"
cp -r "$WS_DIR" "$R/app/node_modules/ws"
cp -r "$MSGPACK_DIR" "$R/app/node_modules/@msgpack/msgpack"
cp "$FIXTURE/editor.mjs" "$FIXTURE/sim.mjs" "$FIXTURE/nt4.mjs" "$FIXTURE/halsim.mjs" "$FIXTURE/hold.mjs" "$R/app/"
cp "$FIXTURE/passwd" "$FIXTURE/group" "$R/etc/"
cp "$FIXTURE/Dockerfile" "$CTX/Dockerfile"

old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
# No buildx on these machines: the classic builder (DOCKER_BUILDKIT=0) needs nothing else.
if ! out="$(DOCKER_BUILDKIT=0 docker build --force-rm -q --label "$HASH_LABEL=$HASH" -t "$TAG" "$CTX" 2>&1)"; then
  printf '%s\n' "$out" >&2
  die "docker build failed"
fi
replace_tag "$TAG" "$old_id"
say "built $TAG ($(image_size_mb "$TAG") MB) in $(since "$start_ms")"
