import { loadConfig } from '@herald/gateway/operator';
import { type KeptUser, type MigrationReport, migrateToTenant } from '@herald/inbox';
import { DEFAULT_TENANT, isTenantId } from '@herald/protocol';
import { type CliIo, type Env, parseCommand, redisTarget, settingsFor, withRedis } from './io.js';

const USAGE = `usage: herald inbox <command>
  migrate --tenant <tenant id> [--dry-run]
                                 move the inboxes written before tenants existed (read today as tenant
                                 "${DEFAULT_TENANT}"'s) to <tenant id>, for a deployment coming from before tenants
                                 whose one tenant was not "${DEFAULT_TENANT}" (it moves every user of that layout:
                                 not for a deployment where tenant "${DEFAULT_TENANT}" is in use). User by user: a user
                                 who already has keys in <tenant id>'s layout is kept in place, whole, and
                                 listed with why. --dry-run: change nothing, list what would be moved and
                                 kept. Safe to run again; run it before the new workers start
Reads REDIS_URL and HERALD_INBOX_PREFIX like the gateway.`;

/**
 * `herald inbox migrate --tenant <id> [--dry-run]`: an upgrade from the time before tenants. Returns the
 * exit code: 0 done (users kept in place are listed, not an error), 1 when keys of a moved user were
 * left behind (the tenant's workers wrote during the run) or Redis is unreachable, 2 wrong usage.
 *
 * @example
 * ```ts
 * process.exitCode = await run(['migrate', '--tenant', 'acme', '--dry-run'], { out: console.log, err: console.error });
 * ```
 */
export async function run(args: string[], io: CliIo, env: Env = process.env): Promise<number> {
  const parsed = parseCommand(
    args,
    ['migrate'],
    { tenant: { type: 'string' }, 'dry-run': { type: 'boolean' } },
    USAGE,
    io,
  );
  if (typeof parsed === 'number') return parsed;
  const tenant = parsed.values.tenant;
  if (tenant !== undefined && !isTenantId(tenant)) {
    io.err(`--tenant "${tenant}" is not a tenant id: use 1 to 64 of A-Z a-z 0-9 _ . -\n${USAGE}`);
    return 2;
  }
  if (!isTenantId(tenant) || tenant === DEFAULT_TENANT) {
    io.err(`migrate needs --tenant <tenant id> other than "${DEFAULT_TENANT}"\n${USAGE}`);
    return 2;
  }
  const dryRun = parsed.values['dry-run'] === true;
  const config = settingsFor(() => loadConfig(env, { secrets: false }), io);
  if (config === undefined) return 1;
  return withRedis(redisTarget(config), io, async (redis) => {
    const report = await migrateToTenant(redis, { prefix: config.inbox.prefix, tenantId: tenant, dryRun });
    printReport(report, tenant, io);
    return report.conflicts.length > 0 ? 1 : 0;
  });
}

function printReport(report: MigrationReport, tenant: string, io: CliIo): void {
  const users = `${report.movedUsers} user${report.movedUsers === 1 ? '' : 's'}, each whole`;
  io.out(
    report.dryRun
      ? `dry run, nothing changed: would move ${report.moved} keys to tenant ${tenant} (${users})`
      : `moved ${report.moved} keys to tenant ${tenant} (${users})`,
  );
  if (report.kept.length > 0) {
    io.out(
      `${report.dryRun ? 'would keep' : 'kept'} ${report.kept.length} user${report.kept.length === 1 ? '' : 's'} in place, whole (none of their keys ${report.dryRun ? 'would move' : 'moved'}; they stay tenant "${DEFAULT_TENANT}"'s):`,
    );
    for (const user of report.kept) io.out(`  ${user.userId}: ${keptWhy(user, tenant)}`);
  }
  if (report.conflicts.length > 0) {
    io.err(
      `${report.conflicts.length} keys left in place although their user's other keys moved: tenant ${tenant}'s workers wrote these names during the migration (stop them, then look at these keys): ${report.conflicts.slice(0, 10).join(', ')}${report.conflicts.length > 10 ? ', …' : ''}`,
    );
  }
}

/** Why a user stays where they were, in one line. */
function keptWhy(user: KeptUser, tenant: string): string {
  const theirs = `${user.existing} key${user.existing === 1 ? '' : 's'} of theirs`;
  const examples = `${user.examples.join(', ')}${user.existing > user.examples.length ? ', …' : ''}`;
  const why =
    user.found === 'before'
      ? `tenant ${tenant} already has ${theirs} (${examples})`
      : `tenant ${tenant}'s workers wrote ${theirs} while the migration ran (${examples})`;
  return `${user.keys} key${user.keys === 1 ? '' : 's'} kept: ${why}`;
}
