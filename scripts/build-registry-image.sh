#!/usr/bin/env bash
# Builds classroom-registry:2.8, a container registry for a swarm without the internet
# (docs/swarm.md, "Images on every node"): the project's minimal Debian root
# (classroom-base/stage:debian-<key>, which scripts/build-base-images.sh keeps) with Debian's
# docker-registry (the Distribution registry 2.8), serving plain HTTP on :5000 with its storage in
# the volume /var/lib/docker-registry, run as the package's user. Idempotent: the image carries the
# label service.registry-image-hash=<hash of this script and the root's id>; when the tag has the
# current hash nothing happens (well under a second, no output). Packages come from the root's apt
# sources (this machine's mirror). Settings: REGISTRY_IMAGE_TAG; nothing else of the caller's
# environment reaches a build step.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-registry-image
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$ROOT/scripts/$(basename "$0")" REGISTRY_IMAGE_TAG

TAG="${REGISTRY_IMAGE_TAG:-classroom-registry:2.8}"
STAGE_REPO=classroom-base/stage
HASH_LABEL=service.registry-image-hash

docker info >/dev/null 2>&1 || die "Docker Engine does not answer: start dockerd (scripts/provision.sh does)"
BASE="$(docker images --format '{{.Repository}}:{{.Tag}}' "$STAGE_REPO" | grep ":debian-" | head -n 1 || true)"
[ -n "$BASE" ] || die "no $STAGE_REPO:debian-* image: bash scripts/build-base-images.sh makes it"
base_id="$(docker image inspect --format '{{.Id}}' "$BASE")"

# The package's own configuration (filesystem storage in /var/lib/docker-registry, :5000, deletes
# allowed) without its htpasswd authentication: the registry is for the nodes' network, which the
# node firewall closes to workspaces (docs/swarm.md; on a network shared with others, give it TLS
# and htpasswd back through REGISTRY_* settings).
DOCKERFILE="FROM $BASE
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker-registry && \\
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb && \\
    sed -i '/^auth:/,/^    path:/d' /etc/docker/registry/config.yml && ! grep -q '^auth:' /etc/docker/registry/config.yml && \\
    install -d -o docker-registry -g docker-registry /var/lib/docker-registry && docker-registry --version
VOLUME /var/lib/docker-registry
USER docker-registry
EXPOSE 5000
ENTRYPOINT [\"docker-registry\"]
CMD [\"serve\", \"/etc/docker/registry/config.yml\"]"

HASH="$({
  echo "base $base_id"
  printf '%s\n' "$DOCKERFILE"
  cat "$0" "$ROOT/scripts/lib.sh"
} | sha256sum | cut -c1-16)"

up_to_date() { image_up_to_date "$HASH_LABEL" "$TAG" "$HASH"; }
up_to_date && exit 0

if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/classroom-registry-image.lock"
  flock 9
  up_to_date && exit 0
fi

start_ms=$(now_ms)
say "building $TAG on $BASE (inputs $HASH)"
CTX="$(mktemp -d "${TMPDIR:-/tmp}/classroom-registry-image.XXXXXX")"
trap 'rm -rf "$CTX"' EXIT
printf '%s\n' "$DOCKERFILE" >"$CTX/Dockerfile"
old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
if ! out="$(DOCKER_BUILDKIT=0 docker build --force-rm -q --label "$HASH_LABEL=$HASH" -t "$TAG" "$CTX" 2>&1)"; then
  printf '%s\n' "$out" | tail -n 20 >&2
  die "docker build failed"
fi
replace_tag "$TAG" "$old_id"
say "built $TAG ($(image_size_mb "$TAG") MB) in $(since "$start_ms")"
