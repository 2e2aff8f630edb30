#!/usr/bin/env bash
# Builds classroom-swarm-node:test, the image of one Docker-in-Docker swarm node for the tests and
# benchmarks of the Swarm runtime (test/helpers/swarm.ts): the project's minimal Debian root
# (classroom-base/stage:debian-<key>, which scripts/build-base-images.sh keeps, one key at a time)
# with Debian's docker.io (Engine 20.10, the engine these machines run), iptables and procps,
# running dockerd in the foreground. How a node
# container is started (capabilities, cgroups, its own /var/lib/docker) is the harness's business.
# Idempotent: the image carries the label service.swarm-node-image-hash=<hash of this script and
# the base image's id>; when the tag has the current hash nothing happens (well under a second, no
# output). Packages come from the base image's apt sources (this machine's mirror). Settings:
# SWARM_NODE_IMAGE_TAG; nothing else of the caller's environment reaches a build step.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-swarm-node-image
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$ROOT/scripts/$(basename "$0")" SWARM_NODE_IMAGE_TAG

TAG="${SWARM_NODE_IMAGE_TAG:-classroom-swarm-node:test}"
STAGE_REPO=classroom-base/stage
HASH_LABEL=service.swarm-node-image-hash

docker info >/dev/null 2>&1 || die "Docker Engine does not answer: start dockerd (scripts/provision.sh does)"
# The Debian root of the base images' current key (a stable tag, unlike the images made from it
# with this checkout's Node, which change with the checkout's path).
BASE="$(docker images --format '{{.Repository}}:{{.Tag}}' "$STAGE_REPO" | grep ":debian-" | head -n 1 || true)"
[ -n "$BASE" ] || die "no $STAGE_REPO:debian-* image: bash scripts/build-base-images.sh makes it"
base_id="$(docker image inspect --format '{{.Id}}' "$BASE")"

# The node's dockerd: the container's own socket, and a second one in /engine, a directory the
# harness binds from the host so that the control plane reaches this node's engine without a TCP
# port that a workspace on the swarm could reach. Its containers' cgroups go under one parent
# named after the node, apart from the outer engine's. DOCKERD_ARGS adds options (the harness: the
# cluster's registry as an insecure one).
DOCKERFILE="FROM $BASE
ENTRYPOINT []
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \\
      docker.io iptables ca-certificates procps && \\
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb && dockerd --version
VOLUME /var/lib/docker
STOPSIGNAL SIGTERM
CMD [\"sh\", \"-c\", \"mkdir -p /engine && exec dockerd --host unix:///var/run/docker.sock --host unix:///engine/docker.sock --cgroup-parent /swarm-node-\$(hostname) \$DOCKERD_ARGS\"]"

HASH="$({
  echo "base $base_id"
  printf '%s\n' "$DOCKERFILE"
  cat "$0" "$ROOT/scripts/lib.sh"
} | sha256sum | cut -c1-16)"

up_to_date() { image_up_to_date "$HASH_LABEL" "$TAG" "$HASH"; }
up_to_date && exit 0

if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/classroom-swarm-node-image.lock"
  flock 9
  up_to_date && exit 0
fi

start_ms=$(now_ms)
say "building $TAG on $BASE (inputs $HASH)"
CTX="$(mktemp -d "${TMPDIR:-/tmp}/classroom-swarm-node-image.XXXXXX")"
trap 'rm -rf "$CTX"' EXIT
printf '%s\n' "$DOCKERFILE" >"$CTX/Dockerfile"
old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
if ! out="$(DOCKER_BUILDKIT=0 docker build --force-rm -q --label "$HASH_LABEL=$HASH" -t "$TAG" "$CTX" 2>&1)"; then
  printf '%s\n' "$out" | tail -n 20 >&2
  die "docker build failed"
fi
replace_tag "$TAG" "$old_id"
say "built $TAG ($(image_size_mb "$TAG") MB) in $(since "$start_ms")"
