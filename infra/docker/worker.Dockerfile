# syntax=docker/dockerfile:1
# worker: the BullMQ worker (its /healthz, /readyz and /metrics on port 3002). Build from the repository root:
#   docker build -f infra/docker/worker.Dockerfile -t herald/worker .
# prune: `turbo prune` keeps @herald/worker and the workspace packages it depends on, nothing else;
# build: installs from the pruned lockfile (the dependency layer is reused until a package.json or the
#        lockfile changes), compiles, then `pnpm deploy --prod` copies the app with its production
#        dependencies only (workspace packages copied in, no dev tools);
# run:   Node 24 LTS, slim Debian (glibc: BullMQ's msgpackr-extract uses its prebuilt addon), as `node`.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS prune
WORKDIR /src
RUN npm install -g turbo@2.11.11
COPY . .
RUN turbo prune @herald/worker --docker --out-dir /pruned

FROM ${NODE_IMAGE} AS build
WORKDIR /src
RUN npm install -g pnpm@12.4.2
COPY --from=prune /pruned/json/ ./
RUN --mount=type=cache,id=herald-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm install --frozen-lockfile
COPY --from=prune /pruned/full/ ./
# Root files the build reads that turbo prune does not carry.
COPY tsconfig.base.json ./
COPY scripts/copy-assets.mjs ./scripts/
RUN --mount=type=cache,id=herald-pnpm-store,target=/root/.local/share/pnpm/store \
    pnpm turbo run build --filter=@herald/worker... --output-logs=errors-only \
 && pnpm deploy --filter=@herald/worker --prod /deploy \
 && rm -rf /deploy/src /deploy/test /deploy/.turbo

FROM ${NODE_IMAGE} AS run
WORKDIR /herald
# Owned by root, read by `node`: the app cannot rewrite its own code.
COPY --from=build /deploy ./
USER node
EXPOSE 3002
# node is PID 1: the app's own SIGTERM/SIGINT handler (close-with-grace, @herald/config onShutdown) stops
# accepting, finishes what is in flight and exits within 10 s; the app starts no child processes, so
# there is nothing for an init to reap.
CMD ["node", "dist/server.js"]
