import {
  ApiKeyStore,
  type KeyInboxBounds,
  type KeyLimits,
  loadConfig,
  MAX_LIMIT,
  MIN_RATE,
} from '@herald/gateway/operator';
import { isTenantId } from '@herald/protocol';
import {
  type CliIo,
  type Env,
  parseOptions,
  redisTarget,
  settingsFor,
  takesPositionals,
  usageExit,
  withRedis,
} from './io.js';

export type { CliIo } from './io.js';

const USAGE = `usage: herald keys <command>
  create --name <name> --tenant <tenant id> [--recipient-rate <n/s>] [--recipient-burst <n>]
         [--sender-rate <n/s>] [--sender-burst <n>]
         [--inbox-max-length <n>] [--inbox-max-age-ms <ms>]
                                                          create a key; it is printed once, store it now
                                                          (tenant id: 1-64 of A-Z a-z 0-9 _ . -)
  list                                                    list keys (never the keys themselves)
  revoke <key id>                                         revoke a key on every gateway within 1 s
Reads REDIS_URL and HERALD_KEY_PREFIX like the gateway.`;

/**
 * `herald keys create|list|revoke`: manages the API keys stored hashed in Redis. Returns the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await run(['create', '--name', 'shop', '--tenant', 'acme'], { out: console.log, err: console.error });
 * ```
 */
export async function run(args: string[], io: CliIo, env: Env = process.env): Promise<number> {
  const [command, ...rest] = args;
  const exit = usageExit(command, ['create', 'list', 'revoke'], USAGE, io);
  if (exit !== undefined) return exit;
  // `list` takes nothing, `revoke` one key id: anything else is refused before Redis is asked.
  const parsed = command === 'create' ? undefined : parseOptions(rest, {}, USAGE, io, command === 'revoke');
  if (command !== 'create' && parsed === undefined) return 2;
  const id = parsed?.positionals[0];
  if (
    command === 'revoke' &&
    !takesPositionals(
      'revoke',
      parsed?.positionals ?? [],
      1,
      'one key id (see `herald keys list`)',
      USAGE,
      io,
    )
  )
    return 2;
  const config = settingsFor(() => loadConfig(env, { secrets: false }), io);
  if (config === undefined) return 1;
  return withRedis(redisTarget(config), io, async (redis) => {
    const store = new ApiKeyStore({ redis, keyPrefix: config.keyPrefix, cacheMs: 0, envKeys: [] });
    if (command === 'create') return create(store, rest, io);
    if (command === 'list' || id === undefined) return list(store, io);
    if (!(await store.revoke(id))) {
      io.err(`no key with id ${id} (see \`herald keys list\`)`);
      return 1;
    }
    io.out(`revoked ${id}`);
    return 0;
  });
}

async function list(store: ApiKeyStore, io: CliIo): Promise<number> {
  const keys = await store.list();
  if (keys.length === 0) io.out('no keys');
  for (const key of keys) {
    const limits = Object.entries(key.limits)
      .map(([name, value]) => `${name}=${value}`)
      .join(' ');
    io.out(
      [
        key.id,
        key.name,
        `tenant=${key.tenantId}`,
        `created=${key.createdAt}`,
        key.revokedAt
          ? `REVOKED=${key.revokedAt}`
          : isTenantId(key.tenantId)
            ? 'active'
            : 'REFUSED (invalid tenant id)',
        limits,
        key.inbox?.maxLength !== undefined ? `inboxMaxLength=${key.inbox.maxLength}` : '',
        key.inbox?.maxAgeMs !== undefined ? `inboxMaxAgeMs=${key.inbox.maxAgeMs}` : '',
      ]
        .filter(Boolean)
        .join('  '),
    );
  }
  return 0;
}

async function create(store: ApiKeyStore, args: string[], io: CliIo): Promise<number> {
  const parsed = parseOptions(
    args,
    {
      name: { type: 'string' },
      tenant: { type: 'string' },
      'recipient-rate': { type: 'string' },
      'recipient-burst': { type: 'string' },
      'sender-rate': { type: 'string' },
      'sender-burst': { type: 'string' },
      'inbox-max-length': { type: 'string' },
      'inbox-max-age-ms': { type: 'string' },
    },
    USAGE,
    io,
  );
  if (!parsed) return 2;
  const values: Record<string, string | undefined> = parsed.values;
  if (!values.name || !values.tenant) {
    io.err(`create needs --name and --tenant\n${USAGE}`);
    return 2;
  }
  if (!isTenantId(values.tenant)) {
    io.err(`--tenant "${values.tenant}" is not a tenant id: use 1 to 64 of A-Z a-z 0-9 _ . -`);
    return 2;
  }
  const limits: KeyLimits = {};
  const numeric: [keyof KeyLimits, string][] = [
    ['recipientPerSecond', 'recipient-rate'],
    ['recipientBurst', 'recipient-burst'],
    ['senderPerSecond', 'sender-rate'],
    ['senderBurst', 'sender-burst'],
  ];
  for (const [field, flag] of numeric) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const value = Number(raw);
    const burst = flag.endsWith('burst');
    // The bounds of the gateway's own settings: what the buckets count exactly, and expire.
    const least = burst ? 1 : MIN_RATE;
    if (
      !Number.isFinite(value) ||
      value < least ||
      value > MAX_LIMIT ||
      (burst && !Number.isInteger(value))
    ) {
      io.err(
        `--${flag} must be ${burst ? 'an integer' : 'a number'} from ${least} to ${MAX_LIMIT} (as the gateway's own limit settings), got "${raw}"`,
      );
      return 2;
    }
    limits[field] = value;
  }
  const inbox: KeyInboxBounds = {};
  for (const [field, flag] of [
    ['maxLength', 'inbox-max-length'],
    ['maxAgeMs', 'inbox-max-age-ms'],
  ] as const) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value < 1) {
      io.err(`--${flag} must be a positive integer, got "${raw}"`);
      return 2;
    }
    inbox[field] = value;
  }
  const created = await store.create({ name: values.name, tenantId: values.tenant, limits, inbox });
  io.out(`id:     ${created.id}`);
  io.out(`key:    ${created.key}`);
  io.out('Store the key now: Herald keeps only its SHA-256 and cannot show it again.');
  return 0;
}
