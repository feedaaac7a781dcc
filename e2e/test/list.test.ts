import type { ListReply } from '@herald/protocol';
import { redisUrl } from '@herald/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { randomId, Stack, waitFor } from './support/stack.js';

describe("list: a page of the user's own inbox over the socket (what a browser lists with its token)", () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.dispose();
    stack = undefined;
  });

  it('answers pages oldest first with read marks, cursor and the exact unread count; refuses bad input', async () => {
    stack = new Stack(redisUrl());
    const { a } = await stack.startDelivery();
    const user = randomId('alice');
    const other = randomId('bob');
    const sent = await stack.send(user, 5);
    await stack.send(other, 2);
    await waitFor(async () => (await stack?.inboxIds(user))?.length === 5, { what: 'five appended' });
    // The inbox's order: workers take the five jobs in parallel, so it may differ from the sending order.
    const ids = await stack.inboxIds(user);
    expect([...ids].sort()).toEqual([...sent].sort());
    const client = stack.client(user);
    await client.connect(a.url);
    expect(await client.command('read', { ids: [ids[1]] })).toMatchObject({ ok: true, changed: 1 });

    const socket = client.socket;
    if (!socket) throw new Error('not connected');
    const list = (body: unknown): Promise<ListReply> => socket.timeout(20_000).emitWithAck('list', body);
    const first = await list({ limit: 3 });
    if (!first.ok) throw new Error(first.error);
    expect(first.items.map((item) => item.id)).toEqual(ids.slice(0, 3));
    expect(first.items.map((item) => item.read)).toEqual([false, true, false]);
    expect(first.items.every((item) => item.userId === user)).toBe(true);
    expect(first.unread.count).toBe(4);
    expect(first.nextAfter).toBe(first.items[2]?.offset);
    const second = await list({ after: first.nextAfter, limit: 3 });
    if (!second.ok) throw new Error(second.error);
    expect(second.items.map((item) => item.id)).toEqual(ids.slice(3));
    expect(second.nextAfter).toBeNull();

    // Backwards: the newest page first (the SDK's first load), then `nextBefore`.
    const newest = await list({ newest: true, limit: 3 });
    if (!newest.ok) throw new Error(newest.error);
    expect(newest.items.map((item) => item.id)).toEqual(ids.slice(2));
    expect(newest).toMatchObject({ nextAfter: null, nextBefore: newest.items[0]?.offset });
    const older = await list({ before: newest.nextBefore, limit: 3 });
    if (!older.ok) throw new Error(older.error);
    expect(older.items.map((item) => item.id)).toEqual(ids.slice(0, 2));
    expect(older.nextBefore).toBeNull();
    for (const bad of [{ before: 'nope' }, { newest: 'yes' }, { after: first.nextAfter, newest: true }]) {
      expect(await list(bad), JSON.stringify(bad)).toMatchObject({
        ok: false,
        code: 'before' in bad ? 'HERALD_ERR_INBOX_INVALID_OFFSET' : 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
      });
    }

    expect(await list({ after: 'nope' })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_OFFSET',
    });
    expect(await list({ limit: 1001 })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    });
    expect(await list(undefined)).toMatchObject({ ok: true });
    // A typo would silently change the page (the HTTP route refuses unknown parameters too).
    expect(await list({ cursor: first.nextAfter })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
      error: expect.stringContaining('"cursor"'),
    });
    expect(await list('newest')).toMatchObject({ ok: false, code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT' });
  });
});
