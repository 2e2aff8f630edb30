#!/usr/bin/env bash
# Builds the control-plane image (the Dockerfile at the project's root) as CONTROL_IMAGE (default
# classroom-control:latest), on the base image NODE_IMAGE (default node:24-bookworm-slim, which
# Docker pulls when it is not here). With LOCAL_BASE=1 it first builds the local base images from
# Debian's packages (scripts/build-base-images.sh) and uses classroom-base/node:24: the way on a
# machine without a container registry.
#
# The install stage fetches packages from the npm registry (NPM_REGISTRY, default npm's own). When
# TLS to it is inspected by a proxy with a private CA, the build trusts what this machine trusts
# beyond the public CAs: the certificates Debian keeps under /usr/local/share/ca-certificates, or
# the PEM file EXTRA_CA_CERTS_FILE names (passed as the build argument EXTRA_CA_CERTS; not kept in
# the image).
#
# Idempotent: the image carries the label service.control-image-hash=<hash of the build inputs: the
# files the Dockerfile copies, the Dockerfile, .dockerignore, the base image's id, NPM_REGISTRY>;
# when the tag already has the current hash nothing happens (well under a second, no output).
# Concurrent builds are serialised with flock.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TAG="${CONTROL_IMAGE:-classroom-control:latest}"
HASH_LABEL=service.control-image-hash
# What the Dockerfile copies, and what decides how.
INPUTS=(Dockerfile .dockerignore package.json package-lock.json bin src api controllers migrations)

say() { printf 'build-control-image: %s\n' "$*"; }
die() {
  say "$*" >&2
  exit 1
}

command -v docker >/dev/null 2>&1 || die "docker is missing: install Docker Engine (scripts/provision.sh does)"
docker info >/dev/null 2>&1 || die "Docker Engine does not answer: start dockerd (scripts/provision.sh does)"
if [ "${LOCAL_BASE:-0}" = 1 ]; then
  bash "$ROOT/scripts/build-base-images.sh"
  NODE_IMAGE="${NODE_IMAGE:-${NODE_BASE_IMAGE_TAG:-classroom-base/node:24}}"
fi
NODE_IMAGE="${NODE_IMAGE:-node:24-bookworm-slim}"
NPM_REGISTRY="${NPM_REGISTRY:-}"

# An image Docker would have to pull has no id yet: it is part of the hash once it is here.
base_id="$(docker image inspect --format '{{.Id}}' "$NODE_IMAGE" 2>/dev/null || echo "to-pull")"
HASH="$({
  echo "base $NODE_IMAGE $base_id registry $NPM_REGISTRY"
  sha256sum <"$0"
  cd "$ROOT" && find "${INPUTS[@]}" -type f ! -name '*.test.ts' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-16)"

current_hash() { docker image inspect --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$TAG" 2>/dev/null || true; }
# Only the tag counts: an image built FROM this one would carry its label too.
up_to_date() { [ "$(current_hash)" = "$HASH" ]; }
up_to_date && exit 0

if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/classroom-control-image.lock"
  flock 9
  up_to_date && exit 0
fi

# Certificates this machine trusts beyond the public CAs (a TLS-inspecting proxy's, a mirror's).
extra_ca=""
if [ -n "${EXTRA_CA_CERTS_FILE:-}" ]; then
  extra_ca="$(cat "$EXTRA_CA_CERTS_FILE")" || die "cannot read EXTRA_CA_CERTS_FILE=$EXTRA_CA_CERTS_FILE"
else
  for f in /usr/local/share/ca-certificates/*.crt; do
    if [ -f "$f" ]; then extra_ca+="$(cat "$f")"$'\n'; fi
  done
fi

start_ms=$(($(date +%s%N) / 1000000))
say "building $TAG on $NODE_IMAGE (inputs $HASH)"
# build TAG [--target STAGE]: the classic builder (no buildx on these machines), replacing the
# tag's previous image (removed unless a container still uses it).
build() {
  local tag="$1" old new out
  shift
  old="$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
  if ! out="$(DOCKER_BUILDKIT=0 docker build --force-rm -q "$@" \
    --build-arg NODE_IMAGE="$NODE_IMAGE" \
    --build-arg NPM_REGISTRY="$NPM_REGISTRY" \
    --build-arg EXTRA_CA_CERTS="$extra_ca" \
    -t "$tag" "$ROOT" 2>&1)"; then
    printf '%s\n' "$out" | tail -n 40 >&2
    die "docker build of $tag failed"
  fi
  new="$(docker image inspect --format '{{.Id}}' "$tag")"
  if [ -n "$old" ] && [ "$old" != "$new" ]; then docker rmi "$old" >/dev/null 2>&1 || true; fi
}
# The install stage under a tag of its own: the layer cache that makes a rebuild after a source
# edit skip npm ci, and never a dangling image left behind when the lock file changes.
build "$TAG-dependencies" --target dependencies
build "$TAG" --label "$HASH_LABEL=$HASH"

size="$(docker image inspect --format '{{.Size}}' "$TAG")"
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
say "built $TAG ($((size / 1000000)) MB) in $((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s"
