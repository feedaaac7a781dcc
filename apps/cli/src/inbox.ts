import { loadConfig } from '@herald/gateway/operator';
import { migrateToTenant } from '@herald/inbox';
import { DEFAULT_TENANT, isTenantId } from '@herald/protocol';
import { type CliIo, type Env, parseCommand, redisTarget, withRedis } from './io.js';

const USAGE = `usage: herald inbox <command>
  migrate --tenant <tenant id>   move the inboxes written before tenants existed (read today as tenant
                                 "${DEFAULT_TENANT}"'s) to <tenant id>, for a deployment whose one tenant was not
                                 "${DEFAULT_TENANT}"; safe to run again; run it before the new workers start
Reads REDIS_URL and HERALD_INBOX_PREFIX like the gateway.`;

/**
 * `herald inbox migrate --tenant <id>`: an upgrade from the time before tenants. Returns the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await run(['migrate', '--tenant', 'acme'], { out: console.log, err: console.error });
 * ```
 */
export async function run(args: string[], io: CliIo, env: Env = process.env): Promise<number> {
  const parsed = parseCommand(args, ['migrate'], { tenant: { type: 'string' } }, USAGE, io);
  if (typeof parsed === 'number') return parsed;
  const tenant = parsed.values.tenant;
  if (!isTenantId(tenant) || tenant === DEFAULT_TENANT) {
    io.err(`migrate needs --tenant <tenant id> other than "${DEFAULT_TENANT}"\n${USAGE}`);
    return 2;
  }
  const config = loadConfig(env, { secrets: false });
  return withRedis(redisTarget(config), io, async (redis) => {
    const report = await migrateToTenant(redis, { prefix: config.inbox.prefix, tenantId: tenant });
    io.out(`moved ${report.moved} keys to tenant ${tenant}`);
    if (report.conflicts.length > 0) {
      io.err(
        `${report.conflicts.length} keys kept in place (tenant ${tenant} already has them; still readable as "${DEFAULT_TENANT}"): ${report.conflicts.slice(0, 10).join(', ')}${report.conflicts.length > 10 ? ', …' : ''}`,
      );
    }
    return 0;
  });
}
