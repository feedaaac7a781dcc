import { compareOffsets, type Inbox, isOffset, offsetSeq } from '@herald/inbox';
import type { InboxOffset, NotificationEvent, ResyncEvent, SyncedEvent, UnreadEvent } from '@herald/protocol';
import type { Logger } from 'pino';

/** What a {@link Delivery} sends to its socket. */
export interface DeliveryTarget {
  notification(event: NotificationEvent): void;
  synced(event: SyncedEvent): void;
  resync(event: ResyncEvent): void;
  /**
   * Resolves when the socket can take another page (its client read what it was sent, see backlog.ts)
   * or is closed; absent: always.
   */
  room?(): Promise<void>;
}

/** Settings of a {@link Delivery}. */
export interface DeliveryOptions {
  gapWaitMs: number;
  replayPage: number;
  /** Delay before retrying an inbox read that failed (Redis down), ms. */
  retryMs?: number;
}

/** Live notifications held at most while a replay or gap fill runs; beyond, the inbox read covers them. */
const MAX_HELD = 10_000;

/**
 * The exactly-once, in-order stream of one socket. Every notification reaches the socket through
 * `send`, which only ever moves forward by one `seq`:
 * - on connect, the user's live channel is already subscribed (live events arrive and are held) while
 *   the inbox is replayed after the client's `lastOffset`; then the held events are let through, those
 *   at or before the last replayed offset dropped. No gap: Redis confirmed the subscription before the
 *   first read. No duplicate: offsets only move forward.
 * - a live event whose `seq` is not the next one (concurrent workers publish out of order, or pub/sub
 *   lost a message while Redis restarted) waits `gapWaitMs` for the missing one, then the inbox is read
 *   from the last sent offset. `fill()` does the same on demand (after a Redis reconnect).
 * - an offset that is no longer in the inbox (trimmed, lost) answers `resync`: the client reloads.
 */
export class Delivery {
  #lastOffset: InboxOffset = '0-0';
  #lastSeq = 0;
  #reading = true;
  #held: NotificationEvent[] = [];
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Live events were dropped because too many were held: read the inbox again once the read is done. */
  #overflowed = false;
  /** Notifications sent so far (the replay's are what `synced` reports as `replayed`). */
  #sent = 0;
  readonly #userId: string;
  readonly #inbox: Inbox;
  readonly #target: DeliveryTarget;
  readonly #options: Required<DeliveryOptions>;
  readonly #log: Logger;

  constructor(userId: string, inbox: Inbox, target: DeliveryTarget, options: DeliveryOptions, log: Logger) {
    this.#userId = userId;
    this.#inbox = inbox;
    this.#target = target;
    this.#options = { retryMs: 1000, ...options };
    this.#log = log;
  }

  /** The last offset sent to the socket. */
  get lastOffset(): InboxOffset {
    return this.#lastOffset;
  }

  /**
   * Replays after `lastOffset` (absent: nothing, live from now), then goes live and sends `synced`.
   * Call once the user's live channel is subscribed (Redis confirmed it).
   */
  async start(lastOffset: InboxOffset | undefined, unread: () => Promise<UnreadEvent>): Promise<void> {
    // Set once: a read that fails part-way resumes from the last offset sent, not the client's (which
    // would send the pages already sent again).
    if (lastOffset !== undefined) this.#moveTo(lastOffset);
    const sentBefore = this.#sent;
    let caughtUp = false;
    let count: UnreadEvent | undefined;
    while (count === undefined) {
      try {
        if (!caughtUp && lastOffset === undefined) {
          this.#moveTo(await this.#inbox.latestOffset(this.#userId));
        } else if (!caughtUp) {
          await this.#readInbox();
        }
        caughtUp = true;
        // Asked until it answers: without `synced` the client would wait for good.
        count = await unread();
      } catch (error) {
        if (this.#closed) return;
        this.#log.warn({ err: error, userId: this.#userId }, 'replay failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, this.#options.retryMs));
      }
      if (this.#closed) return;
    }
    const replayed = this.#sent - sentBefore;
    this.#reading = false;
    this.#release();
    this.#afterRead();
    this.#target.synced({ lastOffset: this.#lastOffset, replayed, unread: count });
  }

  /** A live notification for this socket's user (from its live channel). */
  live(event: NotificationEvent): void {
    // A notification without an offset (a worker from before the inbox, during a rolling upgrade) cannot
    // be ordered: it is left to the inbox read that the next gap triggers.
    if (this.#closed || !isOffset(event?.offset)) return;
    if (this.#reading) {
      this.#hold(event);
      return;
    }
    this.#offer(event);
  }

  /** Reads the inbox after the last sent offset now (e.g. after Redis came back): fills any gap. */
  fill(): void {
    if (this.#closed) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#reading) return;
    this.#reading = true;
    this.#readInbox().then(
      () => {
        this.#reading = false;
        this.#release();
        this.#afterRead();
      },
      (error: unknown) => {
        this.#reading = false;
        this.#log.warn({ err: error, userId: this.#userId }, 'gap fill failed; retrying');
        if (!this.#closed) this.#timer = setTimeout(() => this.fill(), this.#options.retryMs);
      },
    );
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#held = [];
  }

  #afterRead(): void {
    if (!this.#overflowed) return;
    this.#overflowed = false;
    this.#timer ??= setTimeout(() => this.fill(), 0);
  }

  #offer(event: NotificationEvent): void {
    if (compareOffsets(event.offset, this.#lastOffset) <= 0) return; // already sent
    if (offsetSeq(event.offset) === this.#lastSeq + 1) {
      this.#send(event);
      this.#release();
      return;
    }
    this.#hold(event);
    this.#timer ??= setTimeout(() => this.fill(), this.#options.gapWaitMs);
  }

  #hold(event: NotificationEvent): void {
    // Beyond MAX_HELD, dropping is safe: an inbox read after the current one sends them.
    if (this.#held.length < MAX_HELD) {
      this.#held.push(event);
      return;
    }
    this.#overflowed = true;
    if (!this.#reading) this.#timer ??= setTimeout(() => this.fill(), 0);
  }

  /** Sends the held events that now follow on, in order; keeps the rest for the gap fill. */
  #release(): void {
    if (this.#held.length === 0) return;
    const held = this.#held.sort((a, b) => compareOffsets(a.offset, b.offset));
    this.#held = [];
    let index = 0;
    for (; index < held.length; index++) {
      const event = held[index] as NotificationEvent;
      if (compareOffsets(event.offset, this.#lastOffset) <= 0) continue;
      if (offsetSeq(event.offset) !== this.#lastSeq + 1) break;
      this.#send(event);
    }
    const rest = held.slice(index);
    if (rest.length > 0) {
      this.#held = rest;
      this.#timer ??= setTimeout(() => this.fill(), this.#options.gapWaitMs);
    } else if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Sends everything in the inbox after the last sent offset; answers how many. */
  async #readInbox(): Promise<number> {
    let sent = 0;
    for (;;) {
      // A page only once the socket has room for it: a replay of a large inbox to a client that does not
      // read held the whole inbox in memory.
      await this.#target.room?.();
      if (this.#closed) return sent;
      const page = await this.#inbox.read(this.#userId, {
        after: this.#lastOffset,
        limit: this.#options.replayPage,
      });
      if (this.#closed) return sent;
      if (page.trimmed || page.unknownOffset) {
        const latest = await this.#inbox.latestOffset(this.#userId);
        this.#log.info({ userId: this.#userId, from: this.#lastOffset, latest }, 'offset gone: resync');
        this.#moveTo(latest);
        this.#target.resync({ reason: page.trimmed ? 'trimmed' : 'unknown-offset', lastOffset: latest });
        return sent;
      }
      for (const event of page.entries) this.#send(event);
      sent += page.entries.length;
      // Cut by its limit or its size (PAGE_BYTES): read on from its last offset.
      if (!page.more) return sent;
    }
  }

  #send(event: NotificationEvent): void {
    this.#sent++;
    this.#target.notification(event);
    this.#moveTo(event.offset);
  }

  #moveTo(offset: InboxOffset): void {
    this.#lastOffset = offset;
    this.#lastSeq = offsetSeq(offset);
  }
}
