import type { InboxListItem, InboxOffset, NotificationEvent, UnreadEvent } from '@herald/protocol';
import { compareOffsets, isOffset, parseOffset } from './offsets.js';

/** One notification as the client holds it. */
export interface HeraldItem extends NotificationEvent {
  read: boolean;
  /** ISO time of the first ack by any of the user's clients, when the listing said so. */
  deliveredAt?: string | null;
}

/** What {@link InboxStore.add} did with a notification. */
export type AddOutcome =
  /** New, and right after the last one seen. */
  | { kind: 'added' }
  /** New, but notifications between the last seen and this one are missing: fill `after` … `before`. */
  | { kind: 'gap'; after: InboxOffset; before: InboxOffset }
  /** Already held (same offset): a duplicate delivery, ignored. */
  | { kind: 'duplicate' };

/** The store's part of the client state. */
export interface InboxSnapshot {
  /** Oldest first, by offset; at most `maxItems` (the oldest are dropped first). */
  items: readonly HeraldItem[];
  /** The server's exact count, with the version it belongs to; undefined until the server said. */
  unread: UnreadEvent | undefined;
  /** The highest offset seen on the stream: where the next connection resumes. */
  lastOffset: InboxOffset | undefined;
}

/**
 * The client's inbox, with no DOM and no network: notifications keyed and ordered by offset (so a
 * duplicate, from a replay, another tab or two sockets, can never count twice), gap detection on the
 * gapless `seq`, and the unread count taken only from the server, stamped with its `version` (a late or
 * repeated count never overwrites a newer one, so it cannot drift). Read marks are idempotent.
 *
 * @example
 * ```ts
 * const store = new InboxStore({ maxItems: 200 });
 * store.add(event);                 // { kind: 'added' } | { kind: 'gap', … } | { kind: 'duplicate' }
 * store.setUnread({ count: 3, version: 17 });
 * store.markRead(['id-1']);
 * ```
 */
export class InboxStore {
  readonly #byOffset = new Map<InboxOffset, HeraldItem>();
  readonly #offsetById = new Map<string, InboxOffset>();
  /** The most it keeps (`maxItems`, 200 by default). */
  readonly maxItems: number;
  #unread: UnreadEvent | undefined;
  #lastOffset: InboxOffset | undefined;
  /** The newest offset dropped to stay within `maxItems`: anything at or before it is old news. */
  #floor: InboxOffset | undefined;
  #snapshot: InboxSnapshot | undefined;

  constructor(options: { maxItems?: number } = {}) {
    this.maxItems = options.maxItems ?? 200;
  }

  get lastOffset(): InboxOffset | undefined {
    return this.#lastOffset;
  }

  get unread(): UnreadEvent | undefined {
    return this.#unread;
  }

  /** True when a notification with this offset is held, or was and was dropped as the oldest. */
  has(offset: InboxOffset): boolean {
    return (
      this.#byOffset.has(offset) || (this.#floor !== undefined && compareOffsets(offset, this.#floor) <= 0)
    );
  }

  /** A notification from the stream (live or replayed): moves `lastOffset` forward. */
  add(event: NotificationEvent | HeraldItem): AddOutcome {
    if (this.has(event.offset)) return { kind: 'duplicate' };
    const before = this.#lastOffset;
    this.#insert(event);
    if (before === undefined || compareOffsets(event.offset, before) > 0) {
      this.#lastOffset = event.offset;
      if (before !== undefined && parseOffset(event.offset).seq !== parseOffset(before).seq + 1) {
        return { kind: 'gap', after: before, before: event.offset };
      }
    }
    return { kind: 'added' };
  }

  /** Listed notifications (a snapshot page or a gap fill): merged, never moving `lastOffset` back. */
  merge(items: readonly (InboxListItem | HeraldItem)[]): HeraldItem[] {
    const added: HeraldItem[] = [];
    for (const item of items) {
      const held = this.#byOffset.get(item.offset);
      if (held) {
        // The listing knows the read mark and delivery time better than a live event.
        if (held.read !== item.read || held.deliveredAt !== item.deliveredAt) {
          this.#byOffset.set(item.offset, {
            ...held,
            read: item.read,
            deliveredAt: item.deliveredAt ?? null,
          });
          this.#changed();
        }
        continue;
      }
      if (this.has(item.offset)) continue;
      this.#insert(item);
      added.push(this.#byOffset.get(item.offset) as HeraldItem);
      this.advanceTo(item.offset);
    }
    return added;
  }

  /** Takes the server's count if its version is newer than the one held; answers whether it did. */
  setUnread(unread: UnreadEvent | undefined): boolean {
    // Only a newer version; a count not of the server's shape (a stand-in, a server of another version:
    // NaN compares false) is none.
    const next = unread as UnreadEvent;
    if (!(next?.count >= 0 && next.version > (this.#unread?.version ?? -1))) return false;
    this.#unread = { count: next.count, version: next.version };
    this.#changed();
    return true;
  }

  /**
   * Moves `lastOffset` forward (e.g. to the server's `synced`/`resync` offset when nothing was sent);
   * anything that is no offset (a saved one corrupted, a stand-in's) leaves it as it is.
   */
  advanceTo(offset: InboxOffset | undefined): void {
    if (!isOffset(offset)) return;
    if (this.#lastOffset === undefined || compareOffsets(offset, this.#lastOffset) > 0) {
      this.#lastOffset = offset;
      this.#changed();
    }
  }

  /** Marks these ids read locally (idempotent); answers the ids that changed. */
  markRead(ids: readonly string[]): string[] {
    const changed: string[] = [];
    for (const id of ids) {
      // An id it does not hold has no offset, and no item under that (undefined) offset.
      const offset = this.#offsetById.get(id) as string;
      const item = this.#byOffset.get(offset);
      if (!item || item.read) continue;
      this.#byOffset.set(offset, { ...item, read: true });
      changed.push(id);
    }
    if (changed.length > 0) this.#changed();
    return changed;
  }

  /** Marks every held notification read, or those up to and including `upTo` (idempotent). */
  markAllRead(upTo?: InboxOffset): number {
    let changed = 0;
    for (const [offset, item] of this.#byOffset) {
      if (item.read || (upTo !== undefined && compareOffsets(offset, upTo) > 0)) continue;
      this.#byOffset.set(offset, { ...item, read: true });
      changed++;
    }
    if (changed > 0) this.#changed();
    return changed;
  }

  /** Forgets every notification (before a resync reloads the snapshot); keeps the count's version. */
  clear(): void {
    this.#byOffset.clear();
    this.#offsetById.clear();
    this.#lastOffset = undefined;
    this.#floor = undefined;
    this.#changed();
  }

  /** An immutable snapshot, the same object until something changes (for `useSyncExternalStore`). */
  snapshot(): InboxSnapshot {
    this.#snapshot ??= {
      items: [...this.#byOffset.values()].sort((a, b) => compareOffsets(a.offset, b.offset)),
      unread: this.#unread,
      lastOffset: this.#lastOffset,
    };
    return this.#snapshot;
  }

  #insert(event: NotificationEvent | HeraldItem | InboxListItem): void {
    const { unread: _live, ...rest } = event as NotificationEvent & Partial<HeraldItem>;
    const item: HeraldItem = { ...rest, read: rest.read ?? false };
    this.#byOffset.set(item.offset, item);
    this.#offsetById.set(item.id, item.offset);
    if (this.#byOffset.size > this.maxItems) {
      const oldest = this.#oldest();
      if (oldest !== undefined) {
        const dropped = this.#byOffset.get(oldest);
        this.#byOffset.delete(oldest);
        if (dropped) this.#offsetById.delete(dropped.id);
        if (this.#floor === undefined || compareOffsets(oldest, this.#floor) > 0) this.#floor = oldest;
      }
    }
    this.#changed();
  }

  #oldest(): InboxOffset | undefined {
    let oldest: InboxOffset | undefined;
    for (const offset of this.#byOffset.keys())
      if (oldest === undefined || compareOffsets(offset, oldest) < 0) oldest = offset;
    return oldest;
  }

  #changed(): void {
    this.#snapshot = undefined;
  }
}
