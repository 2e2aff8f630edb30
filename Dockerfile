# The control-plane image: `bin/server` on Node 24, which runs the TypeScript sources directly (no
# build step), with the operator CLI on PATH as `cli`. Production dependencies only (npm ci
# --omit=dev from package-lock.json); no tests, benchmarks or dev tools (see .dockerignore).
#
#   docker build -t classroom-control .                    # with a registry: node:24-bookworm-slim
#   LOCAL_BASE=1 bash scripts/build-control-image.sh       # without one: local base images, cached
#
# Build arguments:
#   NODE_IMAGE       the Node 24 base (default node:24-bookworm-slim; classroom-base/node:24 from
#                    scripts/build-base-images.sh where nothing can be pulled)
#   NPM_REGISTRY     an npm registry or mirror to install from (default: npm's own)
#   EXTRA_CA_CERTS   PEM certificates to trust when installing, for a TLS-inspecting proxy or a
#                    mirror with a private CA; used in the install stage only, not in the image
#
# At run time it runs as the user node (1000:1000). The Docker socket is reached through its group:
# give the container the socket's group id (compose.yaml: group_add with DOCKER_GID; docker run:
# --group-add "$(stat -c %g /var/run/docker.sock)"). Data (allowlist, embedded database, backups) is
# in the volume /data.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
ARG NPM_REGISTRY=""
ARG EXTRA_CA_CERTS=""
ENV NPM_CONFIG_UPDATE_NOTIFIER=false
# --ignore-scripts: the production dependencies' install scripts are only optional native builds
# (ssh2, cpu-features: Docker over SSH, unused) and a version notice (protobufjs). Then what no
# program loads: type declarations, source maps, readmes and changelogs, the packages' own tests,
# typeorm's browser build.
RUN set -eu; \
    if [ -n "$EXTRA_CA_CERTS" ]; then printf '%s\n' "$EXTRA_CA_CERTS" >/tmp/extra-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; fi; \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn ${NPM_REGISTRY:+--registry="$NPM_REGISTRY"}; \
    find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \
      -o -iname 'readme.md' -o -iname 'changelog.md' -o -iname 'history.md' \) -delete; \
    rm -rf node_modules/*/test node_modules/*/tests node_modules/@*/*/test node_modules/@*/*/tests \
      node_modules/typeorm/browser /tmp/extra-ca.pem /root/.npm

FROM ${NODE_IMAGE}
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 DATA_DIR=/data
# git (Debian 12's 2.39: http.curloptResolve needs 2.37) for importing a team's project, which the
# control plane clones itself (src/import/clone.ts; prlimit is util-linux, in the base already).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY bin ./bin
COPY migrations ./migrations
COPY src ./src
COPY controllers ./controllers
COPY api ./api
# The Driver Station's page and core: the workspace page's Driver Station is bundled from them (api/driver-station.ts).
COPY images/workspace/extension/src ./images/workspace/extension/src
# The code stays root's (read-only to the server); only /data is the server's.
RUN ln -s /app/bin/cli /usr/local/bin/cli \
 && mkdir -p /data \
 && chown node:node /data \
 && cli --version >/dev/null
USER node
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 8080}/healthz`, { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# No entrypoint, whatever the base has: the command runs as given (bin/server, or `cli …`).
ENTRYPOINT []
CMD ["bin/server"]
