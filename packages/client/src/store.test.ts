import type { NotificationEvent } from '@herald/protocol';
import { describe, expect, it } from 'vitest';
import { InboxStore } from './store.js';

const event = (seq: number, extra: Partial<NotificationEvent> = {}): NotificationEvent => ({
  id: `n${seq}`,
  offset: `1700000000000-${seq}`,
  userId: 'alice',
  payload: { seq },
  createdAt: '2026-12-01T00:00:00.000Z',
  ...extra,
});

describe('InboxStore: the core, no DOM, no network', () => {
  it('orders by offset, whatever the arrival order, and never holds a duplicate', () => {
    const store = new InboxStore();
    expect(store.add(event(2))).toEqual({ kind: 'added' });
    expect(store.add(event(3))).toEqual({ kind: 'added' });
    expect(store.merge([{ ...event(1), read: true, deliveredAt: null }])).toHaveLength(1);
    expect(store.add(event(3))).toEqual({ kind: 'duplicate' });
    expect(store.merge([{ ...event(2), read: false, deliveredAt: null }])).toEqual([]);
    expect(store.snapshot().items.map((item) => item.id)).toEqual(['n1', 'n2', 'n3']);
    expect(store.lastOffset).toBe('1700000000000-3');
  });

  it('detects a gap on the gapless seq and says which range to fill', () => {
    const store = new InboxStore();
    store.add(event(1));
    expect(store.add(event(4))).toEqual({
      kind: 'gap',
      after: '1700000000000-1',
      before: '1700000000000-4',
    });
    // The fill brings 2 and 3 without moving lastOffset back.
    store.merge([2, 3].map((seq) => ({ ...event(seq), read: false, deliveredAt: null })));
    expect(store.snapshot().items.map((item) => item.id)).toEqual(['n1', 'n2', 'n3', 'n4']);
    expect(store.lastOffset).toBe('1700000000000-4');
  });

  it("keeps only the server's unread count with the highest version: a late or repeated one never wins", () => {
    const store = new InboxStore();
    expect(store.setUnread({ count: 3, version: 10 })).toBe(true);
    expect(store.setUnread({ count: 7, version: 9 })).toBe(false); // late
    expect(store.setUnread({ count: 3, version: 10 })).toBe(false); // repeated
    expect(store.unread).toEqual({ count: 3, version: 10 });
    store.add(event(1, { unread: { count: 4, version: 11 } }));
    // The store takes counts only through setUnread: the client passes the event's own stamp.
    expect(store.unread).toEqual({ count: 3, version: 10 });
    expect(store.snapshot().items[0]).not.toHaveProperty('unread');
  });

  it('read marks are idempotent; markAllRead honours upTo', () => {
    const store = new InboxStore();
    for (const seq of [1, 2, 3]) store.add(event(seq));
    expect(store.markRead(['n1', 'nope'])).toEqual(['n1']);
    expect(store.markRead(['n1'])).toEqual([]);
    expect(store.markAllRead('1700000000000-2')).toBe(1);
    expect(store.snapshot().items.map((item) => item.read)).toEqual([true, true, false]);
    expect(store.markAllRead()).toBe(1);
    expect(store.markAllRead()).toBe(0);
  });

  it('keeps the newest maxItems; a dropped offset still counts as seen', () => {
    const store = new InboxStore({ maxItems: 2 });
    for (const seq of [1, 2, 3]) store.add(event(seq));
    expect(store.snapshot().items.map((item) => item.id)).toEqual(['n2', 'n3']);
    expect(store.add(event(1))).toEqual({ kind: 'duplicate' });
    expect(store.has('1700000000000-1')).toBe(true);
  });

  it('snapshot() is the same object until something changes (useSyncExternalStore)', () => {
    const store = new InboxStore();
    store.add(event(1));
    const first = store.snapshot();
    expect(store.snapshot()).toBe(first);
    store.add(event(1));
    expect(store.snapshot()).toBe(first);
    store.markRead(['n1']);
    expect(store.snapshot()).not.toBe(first);
  });

  it('clear() forgets the items (resync) and advanceTo() never moves back', () => {
    const store = new InboxStore();
    store.add(event(5));
    store.clear();
    expect(store.snapshot().items).toEqual([]);
    store.advanceTo('1700000000000-9');
    store.advanceTo('1700000000000-7');
    expect(store.lastOffset).toBe('1700000000000-9');
    expect(store.add(event(10))).toEqual({ kind: 'added' });
  });
});
