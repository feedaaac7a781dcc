import { type ApiKeyIdentity, ApiKeyStore, Limits, loadConfig } from '@herald/gateway/operator';
import { DEFAULT_TENANT, isTenantId, USER_ID_MAX_LENGTH, USER_ID_PATTERN, userKey } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { type CliIo, type Env, parseCommand, redisTarget, settingsFor, withRedis } from './io.js';

const USAGE = `usage: herald limits <command>
  peek  --user <userId> [--tenant <tenant id>] [--key <api key id>]   a recipient's tokens (and a sender's), without taking any
  reset --user <userId> [--tenant <tenant id>] [--key <api key id>]   refill them (e.g. after a mistaken flood)
--tenant defaults to the key's tenant with --key, else to "default" (the tenant of HERALD_API_KEYS).
With --key, the key's own limits (herald keys create --sender-burst …), else the gateway's defaults;
reads REDIS_URL and the HERALD_* settings like the gateway.`;

/** The ids the gateway gives the keys of `HERALD_API_KEYS` (tenant `default`, default limits; not stored): envKeyId. */
const ENV_KEY_ID = /^env-[0-9a-f]{16}$/;
const USER_ID = new RegExp(USER_ID_PATTERN);

const quietLog = { warn: () => {}, info: () => {}, error: () => {}, debug: () => {} };

/**
 * `herald limits peek|reset`: an operator's view of a user's (and a sender's) token buckets.
 *
 * @example
 * ```ts
 * process.exitCode = await run(['peek', '--user', 'alice'], { out: console.log, err: console.error });
 * ```
 */
export async function run(args: string[], io: CliIo, env: Env = process.env): Promise<number> {
  const parsed = parseCommand(
    args,
    ['peek', 'reset'],
    { user: { type: 'string' }, key: { type: 'string' }, tenant: { type: 'string' } },
    USAGE,
    io,
  );
  if (typeof parsed === 'number') return parsed;
  const { command, values } = parsed;
  const user = values.user;
  if (!user) {
    io.err(`${command} needs --user\n${USAGE}`);
    return 2;
  }
  if (user.length > USER_ID_MAX_LENGTH || !USER_ID.test(user)) {
    io.err(
      `--user "${user}" is not a user id: 1 to ${USER_ID_MAX_LENGTH} of A-Z a-z 0-9 _ . : @ + = | / ~ -\n${USAGE}`,
    );
    return 2;
  }
  if (values.tenant !== undefined && !isTenantId(values.tenant)) {
    io.err(`--tenant "${values.tenant}" is not a tenant id\n${USAGE}`);
    return 2;
  }
  const config = settingsFor(() => loadConfig(env, { secrets: false }), io);
  if (config === undefined) return 1;
  return withRedis(redisTarget(config), io, async (redis) => {
    // The key's buckets are where its tenant and its own limits put them: read with anything else,
    // a peek shows another bucket (or this one against another capacity) and a reset refills nothing.
    let sender: ApiKeyIdentity = { id: '-', name: '', tenantId: values.tenant ?? DEFAULT_TENANT, limits: {} };
    if (values.key !== undefined) {
      const stored = ENV_KEY_ID.test(values.key)
        ? undefined
        : await new ApiKeyStore({ redis, keyPrefix: config.keyPrefix, cacheMs: 0, envKeys: [] }).get(
            values.key,
          );
      if (stored === undefined && !ENV_KEY_ID.test(values.key)) {
        io.err(`no key with id ${values.key} (see \`herald keys list\`)`);
        return 1;
      }
      sender = stored ?? { id: values.key, name: '', tenantId: DEFAULT_TENANT, limits: {} };
      if (values.tenant !== undefined && values.tenant !== sender.tenantId) {
        io.err(
          `key ${values.key} belongs to tenant ${sender.tenantId}, not ${values.tenant}: leave --tenant out\n${USAGE}`,
        );
        return 2;
      }
    }
    const tenant = sender.tenantId;
    // The tenant's buckets: on Redis Cluster its id is their keys' hash tag (ratelimit:{<tenant>}:…).
    const limits = new Limits(redis, config, quietLog as never);
    const limiter = limits.for(sender);
    const key = { sender: sender.id, recipient: userKey(tenant, user) };
    // Without --key: the user's buckets of the deployment's limits, and of each limit set the tenant's
    // keys carry (a key's own recipient limits count in buckets of their own).
    const others = values.key ? [] : await ownLimitSets(redis, config, tenant);
    if (command === 'reset') {
      await limiter.reset(values.key ? key : { ...key, sender: '-' });
      for (const other of others) await limits.for(other.identity).reset({ ...key, sender: '-' });
      io.out(
        `reset: recipient ${user} of ${tenant}${values.key ? ` and sender ${values.key}` : ''}${others.map((other) => `, and for keys with ${other.label}`).join('')} are full again`,
      );
      return 0;
    }
    const state = await limiter.peek(key);
    for (const policy of state.policies) {
      if (policy.policy === 'sender' && !values.key) continue;
      io.out(
        `${policy.policy} ${policy.policy === 'sender' ? values.key : user}: ${policy.remaining} of ${policy.limit} tokens, full in ${Math.ceil(policy.resetAfterMs / 1000)} s`,
      );
    }
    for (const other of others) {
      const recipient = (await limits.for(other.identity).peek({ ...key, sender: '-' })).policies.find(
        (policy) => policy.policy === 'recipient',
      );
      if (recipient)
        io.out(
          `recipient ${user} (keys with ${other.label}): ${recipient.remaining} of ${recipient.limit} tokens, full in ${Math.ceil(recipient.resetAfterMs / 1000)} s`,
        );
    }
    return 0;
  });
}

/**
 * The recipient limit sets of `tenant`'s stored keys other than the deployment's (each counts in buckets
 * of its own), one identity each to read or reset them with, and how to name them.
 */
async function ownLimitSets(
  redis: Redis | Cluster,
  config: ReturnType<typeof loadConfig>,
  tenant: string,
): Promise<{ identity: ApiKeyIdentity; label: string }[]> {
  const records = await new ApiKeyStore({
    redis,
    keyPrefix: config.keyPrefix,
    cacheMs: 0,
    envKeys: [],
  }).list();
  const sets = new Map<string, { identity: ApiKeyIdentity; label: string }>();
  for (const record of records) {
    if (record.tenantId !== tenant || record.revokedAt !== undefined) continue;
    const burst = record.limits.recipientBurst ?? config.rateLimit.burst;
    const rate = record.limits.recipientPerSecond ?? config.rateLimit.perSecond;
    if (burst === config.rateLimit.burst && rate === config.rateLimit.perSecond) continue;
    sets.set(`${burst}/${rate}`, {
      identity: {
        id: '-',
        name: '',
        tenantId: tenant,
        limits: { recipientBurst: burst, recipientPerSecond: rate },
      },
      label: `burst ${burst}, ${rate}/s`,
    });
  }
  return [...sets.values()];
}
