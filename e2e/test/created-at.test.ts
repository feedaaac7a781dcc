import { redisUrl } from '@herald/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, gatewayCall, randomId, Stack, waitFor } from './support/stack.js';

// `createdAt` (when the gateway accepted it) of a notification that was never stored: expired, muted,
// deduplicated or cancelled. Its job said it while queued; once the worker had settled it (an envelope's
// index entry dropped, a cancelled job removed), nothing did, so its status lost the date a backend
// reconciles with.
describe('createdAt of a notification never stored', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.dispose();
    stack = undefined;
  });

  it('is in its status once settled: expired, muted, deduplicated, cancelled', async () => {
    stack = new Stack(redisUrl());
    const gateway = await stack.start('gateway', 'gw');
    const user = randomId('created');
    const send = async (body: Record<string, unknown>) => {
      const response = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
        body: { userId: user, payload: {}, ...body },
      });
      expect(response.status, JSON.stringify(response.body)).toBe(202);
      return String(response.body.id);
    };
    const status = async (id: string) =>
      (await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${id}`)).body;

    const muted = await gatewayCall(gateway.url, API_KEY, 'PUT', `/users/${user}/preferences/mutes`, {
      body: { topics: ['quiet'] },
    });
    expect(muted.status).toBe(200);
    // No worker yet: the expiring one's time passes while it is queued.
    const ids = {
      expired: await send({ ttlMs: 1000 }),
      muted: await send({ topic: 'quiet' }),
      first: await send({ dedupeKey: 'same' }),
      deduplicated: await send({ dedupeKey: 'same' }),
      cancelled: await send({ delayMs: 60_000 }),
    };
    const created: Record<string, string> = {};
    for (const [name, id] of Object.entries(ids)) {
      const queued = await status(id);
      expect(queued.createdAt, name).toEqual(expect.any(String));
      created[name] = String(queued.createdAt);
    }
    expect(
      (await gatewayCall(gateway.url, API_KEY, 'DELETE', `/notifications/${ids.cancelled}`)).status,
    ).toBe(200);
    // By Redis's clock, which stamped createdAt and which the worker judges the ttlMs by.
    const expiresAt = Date.parse(created.expired ?? '') + 1000;
    await waitFor(async () => Number((await stack?.redis.time())?.[0]) * 1000 > expiresAt, {
      what: 'the ttlMs of the expiring one passed',
    });
    await stack.start('worker', 'worker');

    const settled = { expired: 'expired', muted: 'muted', deduplicated: '', cancelled: 'cancelled' };
    for (const [name, state] of Object.entries(settled)) {
      const id = ids[name as keyof typeof ids];
      const body = await waitFor(
        async () => {
          const now = await status(id);
          if (name === 'deduplicated') return now.duplicateOf === ids.first ? now : undefined;
          return now.status === state ? now : undefined;
        },
        { what: `${name} settled` },
      );
      expect(body.createdAt, name).toBe(created[name]);
    }
  });
});
