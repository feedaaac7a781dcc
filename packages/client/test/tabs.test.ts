import { waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import type { ChannelLike } from '../src/index.js';
import { createHeraldServer } from '../src/server.js';
import { MemoryLocks } from './support/memory-locks.js';
import { itemIds, live, once, type Recorded, record } from './support/recorder.js';
import { API_KEY, appended, connections, notify, perTest, randomId } from './support/stack.js';

// Node 20 has BroadcastChannel (each client here is a tab) but no Web Locks: MemoryLocks plays them.
describe('one socket per browser and user: a Web Lock leader, BroadcastChannel followers', () => {
  const each = perTest();
  async function startStack() {
    const started = await each.start(['gateway', 'rt-a', 'worker']);
    return { stack: started.stack, gateway: started.gateway, a: started['rt-a'] };
  }
  const tab = (options: Parameters<typeof record>[0]): Recorded =>
    each.track(record({ heartbeatMs: 300, leaderTimeoutMs: 1500, ...options }));

  const leaders = (list: Recorded[]) => list.filter((t) => t.client.getState().role === 'leader');

  it('three tabs share one socket; all show each notification once; a toast in one tab only; read in one clears all; the leader closes and another takes over, nothing lost or repeated', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('alice');
    const locks = new MemoryLocks();
    const earlier = await notify(gateway, user, 2);
    await appended(gateway, user, earlier.at(-1));
    const three = [1, 2, 3].map(() => tab({ url: a.url, locks, getToken: () => stack.token(user) }));
    for (const t of three) await live(t, 'every tab live');
    expect(leaders(three)).toHaveLength(1);
    expect(three.filter((t) => t.client.getState().role === 'follower')).toHaveLength(2);
    expect(await connections(a)).toBe(1);
    await waitFor(() => three.every((t) => itemIds(t).length === 2), { what: 'the snapshot in every tab' });

    const sent = await notify(gateway, user, 3, 2);
    await waitFor(() => three.every((t) => itemIds(t).length === 5), { what: 'three new in every tab' });
    for (const t of three) {
      expect(itemIds(t)).toEqual([...earlier, ...sent]);
      expect(t.notifications).toEqual(sent);
      expect(t.client.getState().unread?.count).toBe(5);
    }
    const toasts = three.flatMap((t) => t.toasts);
    expect(toasts.sort()).toEqual([...sent].sort());

    // A follower marks one read: through the leader's socket; every tab shows it and the new count.
    const follower = three.find((t) => t.client.getState().role === 'follower') as Recorded;
    expect(await follower.client.markRead([sent[0] as string])).toMatchObject({ changed: 1 });
    // The count (pushed by the server) and the read mark (from the leader) may land a moment apart.
    await waitFor(
      () =>
        three.every(
          (t) =>
            t.client.getState().unread?.count === 4 &&
            t.client.getState().items.find((i) => i.id === sent[0])?.read === true,
        ),
      { what: 'count 4 and the read mark everywhere' },
    );

    // A follower's acks go through the leader's socket.
    follower.client.shown([sent[1] as string]);
    const api = createHeraldServer({ url: gateway.url, apiKey: API_KEY });
    await waitFor(async () => (await api.status(sent[1] as string))?.status === 'delivered', {
      what: 'acked through the leader',
    });

    // A follower lists and marks all read through the leader's socket.
    const page = await follower.client.list({ limit: 2 });
    expect(page.items.map((item) => item.id)).toEqual(earlier);
    expect(await follower.client.markAllRead(page.items[1]?.offset)).toMatchObject({
      changed: 2,
      unread: { count: 2 },
    });
    await waitFor(
      () =>
        three.every(
          (t) =>
            t.client.getState().unread?.count === 2 &&
            t.client
              .getState()
              .items.slice(0, 2)
              .every((i) => i.read),
        ),
      { what: 'count 2 and the marks everywhere' },
    );

    // The leader closes (its tab is closed) while notifications are on their way.
    const leader = leaders(three)[0] as Recorded;
    const rest = three.filter((t) => t !== leader);
    leader.client.close();
    const during = await notify(gateway, user, 3, 5);
    await waitFor(() => leaders(rest).length === 1, { what: 'a new leader' });
    const after = await notify(gateway, user, 2, 8);
    await waitFor(() => rest.every((t) => itemIds(t).length === 10), {
      timeoutMs: 30_000,
      what: 'ten in both',
    });
    for (const t of rest) {
      expect(itemIds(t)).toEqual([...earlier, ...sent, ...during, ...after]);
      expect(t.notifications).toEqual([...sent, ...during, ...after]);
      expect(once(t.notifications)).toBe(true);
    }
    await waitFor(async () => (await connections(a)) === 1, { what: 'one socket again' });
    await waitFor(() => rest.every((t) => t.client.getState().unread?.count === 7), { what: 'count 7' });
  });

  it('a new leader that catches up by replay alone shares the count with the other tabs, not only the notifications', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('alice');
    const locks = new MemoryLocks();
    let target = a.url;
    const three = [1, 2, 3].map(() =>
      tab({
        url: () => target,
        locks,
        getToken: () => stack.token(user),
        backoff: { minMs: 50, maxMs: 500 },
      }),
    );
    for (const t of three) await live(t, 'every tab live');
    const first = await notify(gateway, user, 1);
    await waitFor(() => three.every((t) => t.client.getState().unread?.count === 1), { what: 'count 1' });

    // No realtime server while the leader closes and three more arrive: the next leader gets them by
    // replay only (replayed notifications carry no count; the count comes with `synced`).
    await a.stop('SIGKILL');
    const leader = leaders(three)[0] as Recorded;
    const rest = three.filter((t) => t !== leader);
    leader.client.close();
    const missed = await notify(gateway, user, 3, 1);
    await appended(gateway, user, missed.at(-1));
    target = (await stack.start('realtime', 'rt-b')).url;

    await waitFor(() => rest.every((t) => itemIds(t).length === 4), {
      timeoutMs: 30_000,
      what: 'four in both',
    });
    for (const t of rest) expect(itemIds(t)).toEqual([...first, ...missed]);
    await waitFor(() => rest.every((t) => t.client.getState().unread?.count === 4), {
      what: 'count 4 in both tabs',
    });
  });

  it('a toast shows in the focused tab only, not in the unfocused leader', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('erin');
    const locks = new MemoryLocks();
    const pageOf = (focused: boolean) => {
      const document = Object.assign(new EventTarget(), {
        visibilityState: 'visible',
        hasFocus: () => focused,
      });
      return Object.assign(new EventTarget(), { document });
    };
    const leader = tab({ url: a.url, locks, page: pageOf(false), getToken: () => stack.token(user) });
    await live(leader);
    const focusedPage = pageOf(true);
    const focused = tab({ url: a.url, locks, page: focusedPage, getToken: () => stack.token(user) });
    const other = tab({ url: a.url, locks, page: pageOf(false), getToken: () => stack.token(user) });
    await live(focused);
    await live(other);
    expect(leader.client.getState().role).toBe('leader');
    focusedPage.dispatchEvent(new Event('focus'));
    // The leader hears of the focus through the channel; a notification sent after that toasts there.
    await waitFor(
      async () => {
        await notify(gateway, user, 1);
        return focused.toasts.length > 0;
      },
      { intervalMs: 200, what: 'a toast in the focused tab' },
    );
    const all = itemIds(leader);
    await waitFor(() => itemIds(focused).length === all.length && itemIds(other).length === all.length, {
      what: 'every tab has them',
    });
    expect(focused.toasts.length + leader.toasts.length + other.toasts.length).toBe(all.length);
    expect(other.toasts).toEqual([]);
  });

  it('a frozen leader (holds the lock, says nothing) has its lock stolen by a visible follower', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('bob');
    const locks = new MemoryLocks();
    // A tab that took the lock and froze: it never heartbeats and never releases.
    const name = `herald:v1:${a.url}:default/${user}`;
    void locks.request(name, {}, () => new Promise(() => {})).catch(() => {});
    const bob = tab({ url: a.url, locks, getToken: () => stack.token(user) });
    await live(bob, 'bob live after stealing');
    expect(bob.client.getState().role).toBe('leader');
    const sent = await notify(gateway, user, 2);
    await waitFor(() => itemIds(bob).length === 2, { what: 'delivered' });
    expect(itemIds(bob)).toEqual(sent);
  });

  it('a leader that freezes and thaws: the follower steals, the old leader steps down and catches up as a follower', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('carol');
    const locks = new MemoryLocks();
    // A frozen page runs nothing: its channel neither sends nor handles (messages wait for the thaw).
    let frozen = false;
    const held: unknown[] = [];
    let deliver: (data: unknown) => void = () => {};
    const freezable = (channelName: string): ChannelLike => {
      const channel = new BroadcastChannel(channelName);
      const wrapper: ChannelLike = {
        onmessage: null,
        postMessage: (message) => {
          if (!frozen) channel.postMessage(message);
        },
        close: () => channel.close(),
      };
      deliver = (data) => wrapper.onmessage?.({ data });
      channel.onmessage = (event) => {
        if (frozen) held.push(event.data);
        else deliver(event.data);
      };
      return wrapper;
    };
    const first = tab({ url: a.url, locks, channel: freezable, getToken: () => stack.token(user) });
    await live(first);
    expect(first.client.getState().role).toBe('leader');
    const second = tab({ url: a.url, locks, getToken: () => stack.token(user) });
    await live(second);
    const before = await notify(gateway, user, 2);
    await waitFor(() => itemIds(second).length === 2, { what: 'follower has two' });

    frozen = true;
    // The follower shows the two while its leader is frozen: its acks wait in the frozen page, which
    // thaws as a follower. They used to be dropped there: never `delivered` (a Web Push escalation then
    // goes out for what the user saw).
    second.client.shown(before);
    await waitFor(() => second.client.getState().role === 'leader', { what: 'the follower stole the lock' });
    await waitFor(() => first.client.getState().role === 'follower', { what: 'the old leader stepped down' });
    const whileFrozen = await notify(gateway, user, 2, 2);
    await waitFor(() => itemIds(second).length === 4, { what: 'new leader delivers' });
    await waitFor(async () => (await connections(a)) === 1, { what: 'the old leader closed its socket' });

    frozen = false;
    // The thaw: the page runs the messages that waited.
    for (const data of held.splice(0)) deliver(data);
    const after = await notify(gateway, user, 1, 4);
    await waitFor(() => itemIds(first).length === 5 && itemIds(second).length === 5, {
      what: 'both have five',
    });
    expect(itemIds(first)).toEqual([...before, ...whileFrozen, ...after]);
    expect(itemIds(second)).toEqual(itemIds(first));
    expect(once(first.notifications)).toBe(true);
    expect(once(second.notifications)).toBe(true);
    expect(second.notifications).toEqual([...before, ...whileFrozen, ...after]);
    const api = createHeraldServer({ url: gateway.url, apiKey: API_KEY });
    await waitFor(
      async () =>
        (await Promise.all(before.map((id) => api.status(id)))).every((s) => s?.status === 'delivered'),
      { what: 'the follower’s acks delivered' },
    );
  });

  it('a command sent before the tab won the election (the first tab, just opened; a follower whose leader closes) is answered once it leads', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('erin');
    const locks = new MemoryLocks();
    await appended(gateway, user, (await notify(gateway, user, 1)).at(-1));
    // At once, before the election: the tab is a follower until it holds the lock.
    const first = tab({ url: a.url, locks, getToken: () => stack.token(user), timeoutMs: 20_000 });
    const listed = first.client.preferences();
    expect(first.client.getState().role).toBe('follower');
    expect(await listed).toEqual({ muted: { topics: [], types: [] } });
    expect(first.client.getState().role).toBe('leader');

    // A follower's command still waiting when its leader goes: it becomes the leader and answers it.
    const second = tab({ url: a.url, locks, getToken: () => stack.token(user), timeoutMs: 20_000 });
    await live(second);
    expect(second.client.getState().role).toBe('follower');
    first.client.close();
    const muted = await second.client.mute({ type: 'digest' });
    expect(muted.muted.types).toEqual(['digest']);
    await waitFor(() => second.client.getState().role === 'leader', { what: 'the follower leads' });
  });

  it('a getToken() that fails before the first election (the browser’s path) shows in getState().error and to the subscribers while it retries', async () => {
    const { a } = await startStack();
    const locks = new MemoryLocks();
    const stuck = tab({
      url: a.url,
      locks,
      backoff: { minMs: 10, maxMs: 50 },
      getToken: () => Promise.reject(new Error('token route answered 500')),
    });
    const seen: string[] = [];
    stuck.client.subscribe((state) => {
      if (state.error) seen.push(state.error.message);
    });
    await waitFor(() => stuck.client.getState().error?.code === 'HERALD_ERR_TOKEN_UNAVAILABLE', {
      what: 'the token failure in getState().error',
    });
    expect(stuck.client.getState().error?.message).toBe('token route answered 500');
    expect(stuck.client.getState().connection).toBe('connecting');
    expect(seen).toContain('token route answered 500');
  });

  it('without Web Locks each tab keeps its own socket and nothing is rebroadcast', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('dave');
    let channels = 0;
    const noLocks = () =>
      tab({
        url: a.url,
        locks: null,
        channel: (channelName) => {
          channels++;
          return new BroadcastChannel(channelName) as unknown as ChannelLike;
        },
        getToken: () => stack.token(user),
      });
    const both = [noLocks(), noLocks()];
    for (const t of both) await live(t);
    expect(both.map((t) => t.client.getState().role)).toEqual(['solo', 'solo']);
    expect(await connections(a)).toBe(2);
    expect(channels).toBe(0);
    const sent = await notify(gateway, user, 3);
    await waitFor(() => both.every((t) => itemIds(t).length === 3), { what: 'both' });
    for (const t of both) {
      expect(t.notifications).toEqual(sent);
      expect(t.toasts).toEqual(sent);
    }
  });
  it('a follower tab mutes a topic through the leader’s socket: its notifications reach no tab, others do; unmuted, they come again; it subscribes to a topic its token allows', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('erin');
    const locks = new MemoryLocks();
    const two = [1, 2].map(() =>
      tab({ url: a.url, locks, getToken: () => stack.token(user, 3600, ['news']) }),
    );
    for (const t of two) await live(t, 'both tabs live');
    const follower = two.find((t) => t.client.getState().role === 'follower') as Recorded;
    const leader = two.find((t) => t !== follower) as Recorded;
    expect(await connections(a)).toBe(1);
    expect(await follower.client.preferences()).toEqual({ muted: { topics: [], types: [] } });
    expect(await follower.client.mute({ topic: 'promo' })).toEqual({
      muted: { topics: ['promo'], types: [] },
    });
    expect(await leader.client.mute({ type: 'digest' })).toEqual({
      muted: { topics: ['promo'], types: ['digest'] },
    });
    expect(await follower.client.preferences()).toEqual({ muted: { topics: ['promo'], types: ['digest'] } });
    const bad = await follower.client.mute({ topic: 'a b' }).catch((error: unknown) => error);
    expect(bad).toMatchObject({ code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT' });

    const api = createHeraldServer({ url: gateway.url, apiKey: API_KEY });
    const muted = await api.notify({ userId: user, topic: 'promo', payload: {} });
    const byType = await api.notify({ userId: user, type: 'digest', payload: {} });
    for (const { id } of [muted, byType])
      await waitFor(async () => (await api.status(id))?.status === 'muted', { what: `${id} muted` });
    const [plain] = await notify(gateway, user, 1);
    await waitFor(() => two.every((t) => itemIds(t).length === 1), { what: 'the plain one in both tabs' });
    for (const t of two) expect(itemIds(t)).toEqual([plain]);

    expect(await follower.client.unmute({ topic: 'promo' })).toEqual({
      muted: { topics: [], types: ['digest'] },
    });
    const again = await api.notify({ userId: user, topic: 'promo', payload: {} });
    await waitFor(() => two.every((t) => itemIds(t).length === 2), { what: 'the unmuted one in both tabs' });
    for (const t of two) expect(itemIds(t)).toEqual([plain, again.id]);

    // Self-service topics: those the token lists, through the leader's socket too.
    expect(await follower.client.topics()).toEqual([{ topic: 'news', subscribed: false }]);
    expect(await follower.client.subscribeTopic('news')).toEqual([{ topic: 'news', subscribed: true }]);
    const refused = await follower.client.subscribeTopic('secret').catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'HERALD_ERR_TOPIC_NOT_ALLOWED' });
    const sent = await fetch(`${gateway.url}/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ topic: 'news', payload: {} }),
    });
    const news = ((await sent.json()) as { id: string }).id;
    await waitFor(() => two.every((t) => itemIds(t).length === 3), { what: 'the topic send in both tabs' });
    for (const t of two) expect(itemIds(t)).toEqual([plain, again.id, news]);
    expect(await leader.client.unsubscribeTopic('news')).toEqual([{ topic: 'news', subscribed: false }]);
  });
});
