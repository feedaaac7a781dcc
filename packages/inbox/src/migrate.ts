import { DEFAULT_TENANT } from '@herald/protocol';
import { Cluster, type Redis } from 'ioredis';
import { InboxError, InboxErrorCode } from './errors.js';
import { assertPrefix, tenantPrefix } from './keys.js';

/** What {@link migrateToTenant} did. */
export interface MigrationReport {
  /** Keys renamed into the tenant's layout. */
  moved: number;
  /**
   * Keys left where they were because the tenant already has a key of that name (the user got new
   * notifications under the tenant before the migration ran); they stay readable as tenant `default`'s.
   */
  conflicts: string[];
}

/** Glob characters of SCAN's MATCH, escaped so that a prefix is matched literally. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}

/**
 * Moves the inboxes written before tenants existed (the layout tenant `default` still reads:
 * `<prefix>{<user>}:…` and `<prefix>id:{<id>}`) into `tenantId`'s layout (`<prefix>t:<tenant>:…`), for a
 * deployment whose one tenant was not `default` (its API keys were created with `--tenant acme`). Each
 * key is renamed with RENAMENX (its hash tag is kept, so it stays in its slot on Redis Cluster): nothing
 * is copied, nothing is lost, and running it again moves what is left. Run it before the upgraded
 * workers start, or a user who receives a notification meanwhile keeps the old inbox as a conflict.
 *
 * @example
 * ```ts
 * const { moved, conflicts } = await migrateToTenant(redis, { prefix: 'herald:inbox:', tenantId: 'acme' });
 * ```
 */
export async function migrateToTenant(
  redis: Redis | Cluster,
  options: { prefix: string; tenantId: string; batch?: number },
): Promise<MigrationReport> {
  assertPrefix(options.prefix);
  if (options.tenantId === DEFAULT_TENANT) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `Tenant "${DEFAULT_TENANT}" already reads the layout from before tenants: nothing to migrate.`,
    );
  }
  const target = tenantPrefix(options.prefix, options.tenantId);
  const report: MigrationReport = { moved: 0, conflicts: [] };
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const patterns = [`${globEscape(options.prefix)}{*`, `${globEscape(options.prefix)}id:{*`];
  for (const node of nodes) {
    for (const match of patterns) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', options.batch ?? 1000);
        cursor = next;
        for (const key of keys) {
          const renamed = target + key.slice(options.prefix.length);
          // Same hash tag on both sides: the same slot, so RENAMENX works on Cluster too.
          const done = await redis.renamenx(key, renamed);
          if (done === 1) report.moved++;
          else report.conflicts.push(key);
        }
      } while (cursor !== '0');
    }
  }
  return report;
}
