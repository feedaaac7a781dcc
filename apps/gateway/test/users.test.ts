import { randomId } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { auth, testAppForFile } from './helpers.js';

const app = await testAppForFile({ HERALD_INBOX_PREFIX: `${randomId('inbox')}:` });

/** Stores `count` notifications in `userId`'s inbox, as the worker does. */
async function seed(userId: string, count: number, tenantId = 'default'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = randomId('n');
    await app.inbox
      .tenant(tenantId)
      .append({ id, userId, payload: { i }, createdAt: new Date().toISOString() });
    ids.push(id);
  }
  return ids;
}

describe('a user’s inbox over REST', () => {
  it('lists the inbox oldest first, page by page, with read state and the exact unread count', async () => {
    const userId = randomId('u');
    const ids = await seed(userId, 5);
    const first = await app.inject({
      method: 'GET',
      url: `/users/${userId}/notifications?limit=2`,
      headers: auth,
    });
    expect(first.statusCode).toBe(200);
    const page = first.json<{
      items: { id: string; read: boolean; offset: string }[];
      nextAfter: string;
      unread: { count: number };
    }>();
    expect(page.items.map((item) => item.id)).toEqual(ids.slice(0, 2));
    expect(page.items.every((item) => item.read === false)).toBe(true);
    expect(page.unread.count).toBe(5);

    const rest = await app.inject({
      method: 'GET',
      url: `/users/${userId}/notifications?after=${page.nextAfter}&limit=10`,
      headers: auth,
    });
    const restPage = rest.json<{ items: { id: string }[]; nextAfter: string | null }>();
    expect(restPage.items.map((item) => item.id)).toEqual(ids.slice(2));
    expect(restPage.nextAfter).toBeNull();
  });

  it('lists backwards from the newest, page by page (newest=true, then before=nextBefore)', async () => {
    const userId = randomId('u');
    const ids = await seed(userId, 5);
    const pages: string[][] = [];
    let url = `/users/${userId}/notifications?newest=true&limit=2`;
    for (;;) {
      const response = await app.inject({ method: 'GET', url, headers: auth });
      expect(response.statusCode).toBe(200);
      const page = response.json<{ items: { id: string }[]; nextBefore: string | null; nextAfter: null }>();
      expect(page.nextAfter).toBeNull();
      pages.push(page.items.map((item) => item.id));
      if (page.nextBefore === null) break;
      url = `/users/${userId}/notifications?before=${page.nextBefore}&limit=2`;
    }
    expect(pages).toEqual([ids.slice(3), ids.slice(1, 3), ids.slice(0, 1)]);
    // Before the first offset there can be: an empty page, not a Redis error.
    const none = await app.inject({
      method: 'GET',
      url: `/users/${userId}/notifications?before=0-0`,
      headers: auth,
    });
    expect(none.statusCode).toBe(200);
    expect(none.json()).toMatchObject({ items: [], nextBefore: null, unread: { count: 5 } });
  });

  it('marks some, then all, read; the count follows exactly', async () => {
    const userId = randomId('u');
    const ids = await seed(userId, 4);
    const some = await app.inject({
      method: 'POST',
      url: `/users/${userId}/notifications/read`,
      headers: auth,
      payload: { ids: [ids[0], ids[1], ids[1]] },
    });
    expect(some.statusCode).toBe(200);
    expect(some.json()).toMatchObject({ changed: 2, unread: { count: 2 } });
    const again = await app.inject({
      method: 'POST',
      url: `/users/${userId}/notifications/read`,
      headers: auth,
      payload: { ids: [ids[0]] },
    });
    expect(again.json()).toMatchObject({ changed: 0, unread: { count: 2 } });
    const all = await app.inject({
      method: 'POST',
      url: `/users/${userId}/notifications/read`,
      headers: auth,
      payload: { all: true },
    });
    expect(all.json()).toMatchObject({ changed: 2, unread: { count: 0 } });
    const listing = await app.inject({ method: 'GET', url: `/users/${userId}/notifications`, headers: auth });
    expect(listing.json<{ items: { read: boolean }[] }>().items.every((item) => item.read)).toBe(true);
  });

  it('answers bad input with a 400 naming the field, and no key with 401', async () => {
    const userId = randomId('u');
    const list = `/users/${userId}/notifications`;
    const cases = [
      [`${list}?after=yesterday`, 'querystring.after'],
      [`${list}?limit=0`, 'querystring.limit'],
      [`${list}?limit=1001`, 'querystring.limit'],
      ['/users/a%20b/notifications', 'params.userId'],
      [`${list}?before=tomorrow`, 'querystring.before'],
      [`${list}?newest=maybe`, 'querystring.newest'],
      [`${list}?after=0-0&newest=true`, 'querystring.after'],
      [`${list}?after=0-0&before=1-1`, 'querystring.after'],
      // Of an offset's shape, but no offset an inbox can hold (beyond 2^53 ms).
      [`${list}?after=99999999999999999999999-0`, 'querystring.after'],
      [`${list}?before=1-99999999999999999999999`, 'querystring.before'],
    ] as const;
    for (const [url, field] of cases) {
      const response = await app.inject({ method: 'GET', url, headers: auth });
      expect(response.statusCode, url).toBe(400);
      // Every 400 names its field in details, as the error says.
      const body = response.json<{ code: string; error: string; details: { field: string }[] }>();
      expect(body.code, url).toBe('HERALD_ERR_VALIDATION');
      expect(body.details?.[0]?.field, url).toBe(field);
      expect(body.error, url).toContain(field);
    }
    const badBody = await app.inject({
      method: 'POST',
      url: `/users/${userId}/notifications/read`,
      headers: auth,
      payload: { ids: [] },
    });
    expect(badBody.statusCode).toBe(400);
    // An upTo of an offset's shape that no inbox holds: as the listing's, a 400 naming body.upTo.
    for (const upTo of ['99999999999999999999-0', '1-99999999999999999999']) {
      const response = await app.inject({
        method: 'POST',
        url: `/users/${userId}/notifications/read`,
        headers: auth,
        payload: { all: true, upTo },
      });
      expect(response.statusCode, upTo).toBe(400);
      const body = response.json<{ code: string; error: string; details: { field: string }[] }>();
      expect(body.code, upTo).toBe('HERALD_ERR_VALIDATION');
      expect(body.details?.[0]?.field, upTo).toBe('body.upTo');
      expect(body.error, upTo).toContain('body.upTo');
    }
    expect((await app.inject({ method: 'GET', url: `/users/${userId}/notifications` })).statusCode).toBe(401);
  });

  it('GET /notifications/:id reads the inbox record after the job is gone', async () => {
    const userId = randomId('u');
    const [id] = await seed(userId, 1);
    const response = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ id, userId, status: 'queued' });
    await app.inbox.ack(userId, [id as string], 'test-instance');
    const delivered = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(delivered.json()).toMatchObject({ id, status: 'delivered' });
    expect(Number.isNaN(Date.parse(delivered.json<{ deliveredAt: string }>().deliveredAt))).toBe(false);
  });
});
