import { checkWebhookUrl, loadConfig, WebhookEvents, WebhookStore } from '@herald/gateway/operator';
import { isTenantId, WEBHOOK_EVENTS, type Webhook, type WebhookEventType } from '@herald/protocol';
import {
  type CliIo,
  type Env,
  parseCommand,
  redisTarget,
  settingsFor,
  takesPositionals,
  withRedis,
} from './io.js';

const USAGE = `usage: herald webhooks <command>
  set <tenant id> <url> [--events <event,…>]   create or change a tenant's delivery webhook; a new one's
                                               signing secret is printed once (events: ${WEBHOOK_EVENTS.join(', ')};
                                               default all)
  show <tenant id>                             its URL, events, state (active | parked), failures, held messages
  list                                         every tenant's webhook, parked ones marked
  rotate <tenant id>                           a new secret, printed once (the previous one signs too for 24 h)
  resume <tenant id>                           unpark it: its held messages are sent again
  delete <tenant id>                           delete it and its held messages
Reads REDIS_URL, HERALD_KEY_PREFIX, HERALD_QUEUE_NAME, HERALD_QUEUE_PREFIX and
HERALD_WEBHOOK_ALLOW_PRIVATE like the gateway.`;

const COMMANDS = ['set', 'show', 'list', 'rotate', 'resume', 'delete'] as const;
/** The positional arguments of each command: how many, and what they are. */
const TAKES: Record<(typeof COMMANDS)[number], readonly [number, string]> = {
  set: [2, 'a tenant id and a url'],
  show: [1, 'one tenant id'],
  list: [0, 'no argument'],
  rotate: [1, 'one tenant id'],
  resume: [1, 'one tenant id'],
  delete: [1, 'one tenant id'],
};

/**
 * `herald webhooks set|show|list|rotate|resume|delete`: the operator's side of tenants' delivery webhooks
 * (the same store as `/admin/tenants/:tenantId/webhook`). Returns the exit code.
 *
 * @example
 * ```ts
 * process.exitCode = await run(['set', 'acme', 'https://api.acme.test/herald'], { out: console.log, err: console.error });
 * ```
 */
export async function run(args: string[], io: CliIo, env: Env = process.env): Promise<number> {
  const parsed = parseCommand(args, COMMANDS, { events: { type: 'string' } }, USAGE, io, true);
  if (typeof parsed === 'number') return parsed;
  const { command } = parsed;
  const [tenantId, url] = parsed.positionals;
  // What a command acts on is all it takes: a second tenant is refused, not ignored after the first
  // (a missing one is named below).
  const [count, what] = TAKES[command];
  if (parsed.positionals.length > count) {
    takesPositionals(command, parsed.positionals, count, what, USAGE, io);
    return 2;
  }
  if (command !== 'set' && parsed.values.events !== undefined) {
    io.err(`--events is for set only\n${USAGE}`);
    return 2;
  }
  if (command !== 'list' && !isTenantId(tenantId)) {
    io.err(`${command} needs a tenant id (1 to 64 of A-Z a-z 0-9 _ . -)\n${USAGE}`);
    return 2;
  }
  const config = settingsFor(() => loadConfig(env, { secrets: false }), io);
  if (config === undefined) return 1;
  let events: WebhookEventType[] | undefined;
  if (command === 'set') {
    const problem =
      url === undefined
        ? { message: 'is missing' }
        : checkWebhookUrl(url, { allowPrivate: config.webhookAllowPrivate });
    if (problem) {
      io.err(`url ${problem.message}\n${USAGE}`);
      return 2;
    }
    if (parsed.values.events !== undefined) {
      const listed = parsed.values.events.split(',').map((event) => event.trim());
      const unknown = listed.filter((event) => !(WEBHOOK_EVENTS as readonly string[]).includes(event));
      if (unknown.length > 0 || listed.length === 0) {
        io.err(`--events: unknown ${unknown.join(', ') || '(none)'}; use ${WEBHOOK_EVENTS.join(', ')}`);
        return 2;
      }
      events = [...new Set(listed)] as WebhookEventType[];
    }
  }
  return withRedis(redisTarget(config), io, async (redis) => {
    const store = new WebhookStore(redis, config.keyPrefix);
    const tenant = tenantId ?? '';
    const none = () => {
      io.err(`no webhook for tenant ${tenant} (herald webhooks set ${tenant} <url>)`);
      return 1;
    };
    switch (command) {
      case 'list': {
        const webhooks = await store.list();
        if (webhooks.length === 0) io.out('no webhooks');
        for (const webhook of webhooks) io.out(line(webhook));
        return 0;
      }
      case 'show': {
        const webhook = await store.get(tenant);
        if (!webhook) return none();
        io.out(line(webhook));
        if (webhook.lastError) io.out(`last error: ${webhook.lastError}`);
        return 0;
      }
      case 'set': {
        const { created, webhook } = await store.set(tenant, { url: url ?? '', events });
        io.out(line(webhook));
        if (created && 'secret' in webhook) printSecret(io, webhook.secret);
        return 0;
      }
      case 'rotate': {
        const rotated = await store.rotate(tenant);
        if (!rotated) return none();
        printSecret(io, rotated.secret);
        io.out(`The previous secret keeps signing beside it until ${rotated.previousSecretUntil ?? 'now'}.`);
        return 0;
      }
      case 'resume': {
        const producer = new WebhookEvents(store, {
          queueName: config.queue.name,
          prefix: config.queue.prefix,
          // The command's own connection (one Redis or the Cluster); BullMQ leaves it open.
          connection: redis,
        });
        try {
          const result = await store.resume(tenant, (held) => producer.resend(held));
          if (result.outcome === 'missing') return none();
          if (result.outcome === 'not-parked') {
            io.err(`the webhook of ${tenant} is not parked: nothing to resume`);
            return 1;
          }
          io.out(`resumed ${tenant}: ${result.resent} held message(s) queued again`);
        } finally {
          await producer.close();
        }
        return 0;
      }
      default: {
        if (!(await store.delete(tenant))) return none();
        io.out(`deleted the webhook of ${tenant}`);
        return 0;
      }
    }
  });
}

function line(webhook: Webhook): string {
  return [
    webhook.tenantId,
    webhook.url,
    webhook.state === 'parked' ? `PARKED since ${webhook.parkedAt ?? '?'}` : 'active',
    `events=${webhook.events.join(',')}`,
    `failures=${webhook.consecutiveFailures}`,
    `held=${webhook.held}`,
    webhook.lastSuccessAt ? `lastSuccess=${webhook.lastSuccessAt}` : '',
  ]
    .filter(Boolean)
    .join('  ');
}

function printSecret(io: CliIo, secret: string): void {
  io.out(`secret: ${secret}`);
  io.out('Store the secret now: it signs every message (webhook-signature) and is not shown again.');
}
