#!/usr/bin/env node
// The operator CLI: `pnpm herald keys …` (API keys), `pnpm herald limits …` (a user's tokens) and
// `pnpm herald inbox migrate …` (an upgrade from before tenants) and `pnpm herald failed …` (failed notifications).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const commands = {
  keys: '../apps/gateway/dist/cli/keys.js',
  limits: '../apps/gateway/dist/cli/limits.js',
  inbox: '../apps/gateway/dist/cli/inbox.js',
  failed: '../apps/worker/dist/cli/failed.js',
};
const [command, ...args] = process.argv.slice(2);
const io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

if (!command || !(command in commands)) {
  io.err(
    'usage: herald keys create|list|revoke …  |  herald limits peek|reset …  |  herald inbox migrate …  |  herald failed list|retry …',
  );
  process.exit(2);
}
const entry = fileURLToPath(new URL(commands[command], import.meta.url));
if (!existsSync(entry)) {
  io.err(`herald ${command} is not built yet: run \`npx pnpm@12.4.2 build\` first.`);
  process.exit(1);
}
const { run } = await import(pathToFileURL(entry).href);
process.exitCode = await run(args, io);
