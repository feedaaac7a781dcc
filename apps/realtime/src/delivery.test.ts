import { type Inbox, type InboxPage, offsetSeq } from '@herald/inbox';
import type { NotificationEvent, ResyncEvent, SyncedEvent } from '@herald/protocol';
import { waitFor } from '@herald/testing';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Delivery } from './delivery.js';

const event = (seq: number): NotificationEvent => ({
  id: `n-${seq}`,
  offset: `1000-${seq}`,
  userId: 'u',
  payload: {},
  createdAt: '',
});

/** An in-memory inbox holding seq `from`..`to` (what `read` and `latestOffset` need). */
function fakeInbox(state: { from: number; to: number; reads: number; pageCut?: number }): Inbox {
  return {
    async read(_user: string, options: { after?: string; limit?: number }): Promise<InboxPage> {
      state.reads++;
      const after = Number((options.after ?? '0-0').split('-')[1]);
      const start = Math.max(after + 1, state.from);
      const entries: NotificationEvent[] = [];
      // `pageCut`: pages cut shorter than their limit, as the inbox cuts one at PAGE_BYTES.
      const most = Math.min(options.limit ?? 1000, state.pageCut ?? Number.POSITIVE_INFINITY);
      for (let seq = start; seq <= state.to && entries.length < most; seq++) entries.push(event(seq));
      const trimmed = after > 0 && entries.length > 0 && start !== after + 1;
      return {
        entries,
        trimmed,
        unknownOffset: after > state.to,
        lastOffset: entries.at(-1)?.offset ?? options.after ?? '0-0',
        more: entries.length === most,
      };
    },
    async latestOffset(): Promise<string> {
      return state.to === 0 ? '0-0' : `1000-${state.to}`;
    },
  } as unknown as Inbox;
}

function setup(state: { from: number; to: number; reads: number; pageCut?: number }, gapWaitMs = 5) {
  const sent: number[] = [];
  const synced: SyncedEvent[] = [];
  const resyncs: ResyncEvent[] = [];
  const delivery = new Delivery(
    'u',
    fakeInbox(state),
    {
      notification: (e) => sent.push(Number(e.offset.split('-')[1])),
      synced: (e) => synced.push(e),
      resync: (e) => resyncs.push(e),
    },
    { gapWaitMs, replayPage: 3 },
    pino({ level: 'silent' }),
  );
  return { delivery, sent, synced, resyncs };
}

const unread = async () => ({ count: 0, version: 0 });

describe('Delivery', () => {
  it('replays after lastOffset in pages, holds live events meanwhile, and drops those already replayed', async () => {
    const state = { from: 1, to: 7, reads: 0 };
    const { delivery, sent, synced } = setup(state);
    const started = delivery.start('1000-2', unread);
    // Live events during the replay: 6 and 7 (also replayed) and 8 (new).
    state.to = 8;
    delivery.live(event(6));
    delivery.live(event(8));
    delivery.live(event(7));
    await started;
    expect(sent).toEqual([3, 4, 5, 6, 7, 8]);
    expect(synced[0]).toMatchObject({ replayed: 6, lastOffset: '1000-8' });
  });

  it('reads on while the inbox cuts its pages short of their limit (by size): every one replayed', async () => {
    const state = { from: 1, to: 9, reads: 0, pageCut: 2 };
    const { delivery, sent, synced } = setup(state);
    await delivery.start('1000-1', unread);
    expect(sent).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
    expect(synced[0]).toMatchObject({ replayed: 8, lastOffset: '1000-9' });
  });

  it('reorders live events published out of order, without reading the inbox', async () => {
    const state = { from: 1, to: 0, reads: 0 };
    const { delivery, sent } = setup(state, 10_000);
    await delivery.start(undefined, unread);
    const readsAfterStart = state.reads;
    for (const seq of [2, 1, 4, 3, 3, 5]) delivery.live(event(seq));
    expect(sent).toEqual([1, 2, 3, 4, 5]);
    expect(state.reads).toBe(readsAfterStart);
  });

  it('fills a gap from the inbox when the missing event does not come (lost pub/sub message)', async () => {
    const state = { from: 1, to: 0, reads: 0 };
    const { delivery, sent } = setup(state);
    await delivery.start(undefined, unread);
    state.to = 4;
    delivery.live(event(1));
    delivery.live(event(3)); // 2 was lost
    delivery.live(event(4));
    await waitFor(() => sent.length === 4, { what: 'the gap filled' });
    expect(sent).toEqual([1, 2, 3, 4]);
  });

  it('fill() after a reconnect sends what was published while pub/sub was down', async () => {
    const state = { from: 1, to: 2, reads: 0 };
    const { delivery, sent } = setup(state);
    await delivery.start('0-0', unread);
    state.to = 5; // appended while the subscriber was disconnected: no live event at all
    delivery.fill();
    await waitFor(() => sent.length === 5, { what: 'the tail' });
    expect(sent).toEqual([1, 2, 3, 4, 5]);
  });

  it('answers resync when the client’s offset was trimmed, and carries on live from the newest', async () => {
    const state = { from: 10, to: 12, reads: 0 };
    const { delivery, sent, resyncs, synced } = setup(state);
    await delivery.start('1000-3', unread);
    expect(resyncs).toEqual([{ reason: 'trimmed', lastOffset: '1000-12' }]);
    expect(sent).toEqual([]);
    expect(synced[0]?.lastOffset).toBe('1000-12');
    delivery.live(event(13));
    expect(sent).toEqual([13]);
  });

  it('a replay cut by a Redis error resumes where it stopped (nothing sent twice); a failed count is asked again', async () => {
    const state = { from: 1, to: 7, reads: 0 };
    const inbox = fakeInbox(state);
    const read = inbox.read.bind(inbox);
    // The second page's read fails once (Redis restarting), and so does the first count.
    inbox.read = async (...args) => {
      if (state.reads === 1) {
        state.reads++;
        throw new Error('Connection is closed.');
      }
      return read(...args);
    };
    let counts = 0;
    const flakyUnread = async () => {
      if (counts++ === 0) throw new Error('Connection is closed.');
      return { count: 7, version: 7 };
    };
    const sent: number[] = [];
    const synced: SyncedEvent[] = [];
    const delivery = new Delivery(
      'u',
      inbox,
      {
        notification: (e) => sent.push(offsetSeq(e.offset)),
        synced: (e) => synced.push(e),
        resync: () => {},
      },
      { gapWaitMs: 5, replayPage: 3, retryMs: 1 },
      pino({ level: 'silent' }),
    );
    await delivery.start('0-0', flakyUnread);
    // The first page used to be sent again after the retry (1, 2, 3, 1, 2, 3, …), and a failed count
    // left the socket without `synced` for good.
    expect(sent).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(synced).toEqual([{ lastOffset: '1000-7', replayed: 7, unread: { count: 7, version: 7 } }]);
  });

  it('ignores a notification without an offset', async () => {
    const { delivery, sent } = setup({ from: 1, to: 0, reads: 0 });
    await delivery.start(undefined, unread);
    delivery.live({ ...event(1), offset: undefined as unknown as string });
    expect(sent).toEqual([]);
  });
});
