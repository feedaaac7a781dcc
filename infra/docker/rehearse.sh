#!/usr/bin/env bash
# Runs each image's prune and build stages (the same commands as infra/docker/<app>.Dockerfile) outside
# Docker, in a temporary folder, and prints the size of what the run stage copies (/deploy): a check of
# the Dockerfiles' steps where no Docker engine runs. Usage: infra/docker/rehearse.sh [app ...]
# (default: gateway worker realtime web cli). The deploy folders stay in $REHEARSE_DIR (printed).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${REHEARSE_DIR:-$(mktemp -d)}"
apps=("$@")
((${#apps[@]})) || apps=(gateway worker realtime web cli)
for app in "${apps[@]}"; do
  pkg="@herald/$app"
  work="$out/$app"
  rm -rf "$work" && mkdir -p "$work/src"
  (cd "$root" && npx --yes turbo@2.11.11 prune "$pkg" --docker --out-dir "$work/pruned" >/dev/null)
  cp -r "$work/pruned/json/." "$work/src/"
  (cd "$work/src" && npx --yes pnpm@12.4.2 install --frozen-lockfile >/dev/null)
  cp -r "$work/pruned/full/." "$work/src/"
  cp "$root/tsconfig.base.json" "$work/src/"
  mkdir -p "$work/src/scripts" && cp "$root/scripts/copy-assets.mjs" "$work/src/scripts/"
  (cd "$work/src" && npx --yes pnpm@12.4.2 turbo run build "--filter=$pkg..." --output-logs=errors-only >/dev/null \
    && npx --yes pnpm@12.4.2 deploy "--filter=$pkg" --prod "$work/deploy" >/dev/null)
  rm -rf "$work/deploy/src" "$work/deploy/test" "$work/deploy/.turbo"
  echo "$app: $(du -sh "$work/deploy" | cut -f1) in $work/deploy"
done
