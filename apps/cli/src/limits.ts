import { type ApiKeyIdentity, Limits, loadConfig } from '@herald/gateway/operator';
import { DEFAULT_TENANT, isTenantId, userKey } from '@herald/protocol';
import { type CliIo, type Env, parseCommand, redisTarget, withRedis } from './io.js';

const USAGE = `usage: herald limits <command>
  peek  --user <userId> [--tenant <tenant id>] [--key <api key id>]   a recipient's tokens (and a sender's), without taking any
  reset --user <userId> [--tenant <tenant id>] [--key <api key id>]   refill them (e.g. after a mistaken flood)
--tenant defaults to "default" (the tenant of HERALD_API_KEYS).
Uses the gateway's default limits; reads REDIS_URL and the HERALD_* settings like the gateway.`;

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
  const tenant = values.tenant ?? DEFAULT_TENANT;
  if (!isTenantId(tenant)) {
    io.err(`--tenant "${tenant}" is not a tenant id\n${USAGE}`);
    return 2;
  }
  const config = loadConfig(env, { secrets: false });
  return withRedis(redisTarget(config), io, async (redis) => {
    // The tenant's buckets: on Redis Cluster its id is their keys' hash tag (ratelimit:{<tenant>}:…).
    const sender: ApiKeyIdentity = { id: values.key ?? '-', name: '', tenantId: tenant, limits: {} };
    const limiter = new Limits(redis, config, quietLog as never).for(sender);
    const key = { sender: sender.id, recipient: userKey(tenant, user) };
    if (command === 'reset') {
      await limiter.reset(values.key ? key : { ...key, sender: '-' });
      io.out(
        `reset: recipient ${user} of ${tenant}${values.key ? ` and sender ${values.key}` : ''} are full again`,
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
    return 0;
  });
}
