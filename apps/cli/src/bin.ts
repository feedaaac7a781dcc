#!/usr/bin/env node
// `herald`: the operator CLI. One command per area; each parses its own options with node:util's
// parseArgs and answers an exit code (0 done, 1 failed, 2 wrong usage).
import { run as failed } from './failed.js';
import { run as inbox } from './inbox.js';
import type { CliIo } from './io.js';
import { run as keys } from './keys.js';
import { run as limits } from './limits.js';
import { run as webhooks } from './webhooks.js';

const AREAS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  keys,
  limits,
  inbox,
  failed,
  webhooks,
};
const USAGE = `usage: herald <area> <command> [options]   (herald <area> help for an area's commands)
  keys create|list|revoke    API keys (stored hashed in Redis), each of one tenant
  limits peek|reset          a user's (and a sender's) token buckets
  inbox migrate [--dry-run]  move inboxes written before tenants to a tenant, user by user
  failed list|retry          notifications that failed every attempt
  webhooks set|show|list|rotate|resume|delete   tenants' delivery webhooks
Reads REDIS_URL (or HERALD_REDIS_CLUSTER_NODES) and the HERALD_* settings like the apps.`;

// A reader that leaves early (`herald webhooks set … | head -1`) closes the pipe: what is left to print
// goes nowhere, and the command still finishes what it does (a secret created is stored) and exits as it
// would have, instead of crashing on EPIPE half-way.
let stdoutClosed = false;
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  stdoutClosed = true;
});
const io: CliIo = {
  out: (line) => {
    if (!stdoutClosed) process.stdout.write(`${line}\n`);
  },
  err: (line) => process.stderr.write(`${line}\n`),
};
const [area, ...args] = process.argv.slice(2);
const command = area === undefined ? undefined : AREAS[area];
if (command === undefined) {
  const help = area === 'help' || area === '--help';
  (help ? io.out : io.err)(help || area === undefined ? USAGE : `unknown area "${area}"\n${USAGE}`);
  process.exitCode = help ? 0 : 2;
} else {
  process.exitCode = await command(args, io);
}
