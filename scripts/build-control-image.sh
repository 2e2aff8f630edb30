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
# Concurrent builds are serialised with flock. Nothing of the caller's environment but the settings
# named here reaches a build step (scripts/lib.sh, clean_environment).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-control-image
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$ROOT/scripts/$(basename "$0")" CONTROL_IMAGE LOCAL_BASE NODE_IMAGE NPM_REGISTRY EXTRA_CA_CERTS_FILE \
  NODE_BASE_IMAGE_TAG POSTGRES_BASE_IMAGE_TAG BASE_DEBIAN_MIRROR BASE_DEBIAN_SECURITY_MIRROR BASE_IMAGES_CACHE

TAG="${CONTROL_IMAGE:-classroom-control:latest}"
HASH_LABEL=service.control-image-hash
# What the Dockerfile copies, and what decides how.
INPUTS=(Dockerfile .dockerignore package.json package-lock.json bin src api controllers migrations images/workspace/extension/src)

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
  cat "$0" "$ROOT/scripts/lib.sh" | sha256sum
  cd "$ROOT" && find "${INPUTS[@]}" -type f ! -name '*.test.ts' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-16)"

# Only the tag counts: an image built FROM this one would carry its label too.
up_to_date() { image_up_to_date "$HASH_LABEL" "$TAG" "$HASH"; }
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

start_ms=$(now_ms)
say "building $TAG on $NODE_IMAGE (inputs $HASH)"
# build TAG [--target STAGE]: the classic builder (no buildx on these machines), replacing the
# tag's previous image (removed unless a container still uses it).
build() {
  local tag="$1" old out
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
  replace_tag "$tag" "$old"
}
# The install stage under a tag of its own: the layer cache that makes a rebuild after a source
# edit skip npm ci, and never a dangling image left behind when the lock file changes.
build "$TAG-dependencies" --target dependencies
build "$TAG" --label "$HASH_LABEL=$HASH"

say "built $TAG ($(image_size_mb "$TAG") MB) in $(since "$start_ms")"
