# syntax=docker/dockerfile:1
# cli: the operator CLI, `herald` (keys, limits, inbox, failed): a one-shot container. Build from the repository root:
#   docker build -f infra/docker/cli.Dockerfile -t herald/cli .
# prune: `turbo prune` keeps @herald/cli and the workspace packages it depends on, nothing else;
# build: installs from the pruned lockfile (the dependency layer is reused until a package.json or the
#        lockfile changes), compiles, then `pnpm deploy --prod` copies the app with its production
#        dependencies only (workspace packages copied in, no dev tools);
# run:   Node 24 LTS, slim Debian (glibc: BullMQ's msgpackr-extract uses its prebuilt addon), as `node`.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS prune
WORKDIR /src
RUN npm install -g turbo@2.11.11
COPY . .
RUN turbo prune @herald/cli --docker --out-dir /pruned

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
    pnpm turbo run build --filter=@herald/cli... --output-logs=errors-only \
 && pnpm deploy --filter=@herald/cli --prod /deploy \
 && rm -rf /deploy/src /deploy/test /deploy/.turbo

FROM ${NODE_IMAGE} AS run
WORKDIR /herald
# Owned by root, read by `node`: the app cannot rewrite its own code.
COPY --from=build /deploy ./
USER node
# `docker run --rm herald/cli keys create --name shop --tenant acme` (REDIS_URL set): the arguments are the CLI's.
ENTRYPOINT ["node", "dist/bin.js"]
CMD ["help"]
