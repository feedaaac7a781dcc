import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { InboxError, InboxErrorCode } from './errors.js';
import type { AppendResult, MuteTarget } from './types.js';

/**
 * First element of each `append-n.lua` reply. The one place that maps it to a result is {@link appendResultOf}.
 *
 * @example
 * ```ts
 * if (reply[0] === AppendCode.Appended) emit(event);
 * ```
 */
export enum AppendCode {
  Appended = 1,
  AlreadyAppended = 2,
  Expired = 3,
  Deduplicated = 4,
  Cancelled = 5,
  Muted = 6,
}

/** The {@link AppendResult} of one notification's `append-n.lua` reply `{ code, offset, count, version, detail }`. */
export function appendResultOf(reply: [number, string, number, number, string]): AppendResult {
  const [code, offset, count, version, detail] = reply;
  const unread = { count, version };
  switch (code) {
    case AppendCode.Appended:
      return { outcome: 'appended', offset, unread };
    case AppendCode.AlreadyAppended:
      return { outcome: 'already-appended', offset, unread };
    case AppendCode.Expired:
      return { outcome: 'expired', unread };
    case AppendCode.Cancelled:
      return { outcome: 'cancelled', unread };
    case AppendCode.Deduplicated:
      return { outcome: 'deduplicated', duplicateOf: detail, unread };
    case AppendCode.Muted:
      return { outcome: 'muted', mutedBy: muteTargetOf(detail), unread };
    default:
      throw new InboxError(InboxErrorCode.UNEXPECTED_REPLY, `append-n.lua answered ${JSON.stringify(reply)}`);
  }
}

/** `topic:<name>` / `type:<name>` (a member of a user's mutes) as `{ topic }` / `{ type }`. */
export function muteTargetOf(member: string): MuteTarget {
  return member.startsWith('type:') ? { type: member.slice(5) } : { topic: member.slice(6) };
}

const SCRIPTS = {
  append: { command: 'heraldInboxAppend', file: 'append-n.lua', numberOfKeys: undefined },
  read: { command: 'heraldInboxRead', file: 'read-3.lua', numberOfKeys: 3 },
  ack: { command: 'heraldInboxAck', file: 'ack-n.lua', numberOfKeys: undefined },
  cancel: { command: 'heraldInboxCancel', file: 'cancel-2.lua', numberOfKeys: 2 },
  mute: { command: 'heraldInboxMute', file: 'mute-1.lua', numberOfKeys: 1 },
  migrate: { command: 'heraldInboxMigrate', file: 'migrate-n.lua', numberOfKeys: undefined },
} as const;
export type ScriptName = keyof typeof SCRIPTS;

type Call = (...args: (string | number)[]) => Promise<unknown>;

/**
 * Registers the inbox's scripts on `redis` (ioredis `defineCommand`: EVALSHA, EVAL on NOSCRIPT) once per
 * client, and returns functions that run them. Variable-key scripts (`-n`) take `numkeys` first.
 *
 * @example
 * ```ts
 * const scripts = defineScripts(redis);
 * await scripts.read(stream, meta, unread, 'all');
 * ```
 */
export function defineScripts(redis: Redis | Cluster): Record<ScriptName, Call> {
  const calls = {} as Record<ScriptName, Call>;
  for (const [name, script] of Object.entries(SCRIPTS) as [ScriptName, (typeof SCRIPTS)[ScriptName]][]) {
    if (!(script.command in redis)) {
      const lua = readFileSync(new URL(`./${script.file}`, import.meta.url), 'utf8');
      redis.defineCommand(
        script.command,
        script.numberOfKeys === undefined ? { lua } : { lua, numberOfKeys: script.numberOfKeys },
      );
    }
    const run = (redis as unknown as Record<string, Call>)[script.command];
    if (typeof run !== 'function') throw new Error(`ioredis did not define ${script.command}`);
    calls[name] = run.bind(redis);
  }
  return calls;
}
