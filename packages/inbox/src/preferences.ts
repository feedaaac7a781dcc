import { MUTES_MAX, type MutedLists, type MuteRequest } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { checkUserId } from './checks.js';
import { InboxError, InboxErrorCode } from './errors.js';
import { inboxKeys, tenantLayout } from './keys.js';
import { defineScripts, type ScriptName } from './scripts.js';
import { checkLabel } from './topics.js';
import { DEFAULT_INBOX_PREFIX } from './types.js';

/** A user's mutes after a change, and how many the change added or removed. */
export interface MuteChange {
  changed: number;
  muted: MutedLists;
}

/**
 * Users' preferences: the topics and types each muted. Per user, one set (`topic:<name>`, `type:<name>`)
 * under the user's inbox hash tag (`InboxKeys.mutes`), which the append script reads: a notification
 * whose topic or type the user muted is recorded `muted` and never stored nor pushed, with no extra
 * round trip per notification (and one slot on Redis Cluster). At most {@link MUTES_MAX} per user. No
 * TTL: a mute lasts until unmuted. It acts on notifications appended from then on, never on those
 * stored already.
 *
 * @example
 * ```ts
 * const preferences = new Preferences(redis).tenant('acme');
 * await preferences.mute('alice', { topics: ['marketing'] });
 * (await preferences.get('alice')).topics; // ['marketing']
 * ```
 */
export class Preferences {
  readonly prefix: string;
  readonly tenantId: string;
  readonly #redis: Redis | Cluster;
  readonly #base: string;
  readonly #scripts: Record<ScriptName, (...args: (string | number)[]) => Promise<unknown>>;

  constructor(redis: Redis | Cluster, options: { prefix?: string; tenantId?: string } = {}) {
    ({
      prefix: this.prefix,
      tenantId: this.tenantId,
      base: this.#base,
    } = tenantLayout(options, DEFAULT_INBOX_PREFIX));
    this.#redis = redis;
    this.#scripts = defineScripts(redis);
  }

  /** The same preferences acting for `tenantId` (a cheap object: no cache needed). */
  tenant(tenantId: string): Preferences {
    return tenantId === this.tenantId
      ? this
      : new Preferences(this.#redis, { prefix: this.prefix, tenantId });
  }

  /** What `userId` muted, each list in byte order. */
  async get(userId: string): Promise<MutedLists> {
    return mutedLists(await this.#redis.smembers(this.#key(userId)));
  }

  /**
   * Mutes `change.topics` and `change.types` for `userId`, all or none.
   *
   * @throws {InboxError} `HERALD_ERR_TOO_MANY_MUTES` when the user would hold more than
   *   {@link MUTES_MAX}; `HERALD_ERR_INBOX_INVALID_ARGUMENT` for a name that is no topic or type.
   */
  async mute(userId: string, change: MuteRequest): Promise<MuteChange> {
    const key = this.#key(userId);
    const members = membersOf(change);
    const [[code, added, size], all] = (await Promise.all([
      this.#scripts.mute(key, MUTES_MAX, ...members),
      this.#redis.smembers(key),
    ])) as [[number, number, number], string[]];
    if (code !== 1) {
      throw new InboxError(
        InboxErrorCode.TOO_MANY_MUTES,
        `User "${userId}" has ${size} mutes, and these would take them past the ${MUTES_MAX} a user may hold: unmute some first (nothing was added).`,
      );
    }
    return { changed: added, muted: mutedLists(all) };
  }

  /** Unmutes `change.topics` and `change.types` for `userId` (those not muted are ignored). */
  async unmute(userId: string, change: MuteRequest): Promise<MuteChange> {
    const key = this.#key(userId);
    const members = membersOf(change);
    const [removed, all] = (await Promise.all([
      this.#redis.srem(key, ...members),
      this.#redis.smembers(key),
    ])) as [number, string[]];
    return { changed: removed, muted: mutedLists(all) };
  }

  #key(userId: string): string {
    return inboxKeys(this.#base, checkUserId(userId)).mutes;
  }
}

/** The set's members of a change (`topic:<name>`, `type:<name>`), each once; at least one. */
function membersOf(change: MuteRequest): string[] {
  const { topics = [], types = [] } = (change ?? {}) as MuteRequest;
  if (!Array.isArray(topics) || !Array.isArray(types) || topics.length + types.length === 0) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      'Expected { topics?: string[], types?: string[] } naming at least one topic or type',
    );
  }
  if (topics.length + types.length > MUTES_MAX) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `At most ${MUTES_MAX} names per call, topics and types together`,
    );
  }
  return [
    ...new Set([
      ...topics.map((name) => `topic:${checkLabel(name, 'topic')}`),
      ...types.map((name) => `type:${checkLabel(name, 'type')}`),
    ]),
  ];
}

function mutedLists(members: readonly string[]): MutedLists {
  const topics: string[] = [];
  const types: string[] = [];
  for (const member of members) {
    if (member.startsWith('topic:')) topics.push(member.slice(6));
    else if (member.startsWith('type:')) types.push(member.slice(5));
  }
  const byBytes = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return { topics: topics.sort(byBytes), types: types.sort(byBytes) };
}
