import { waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { auth, gatewayOnOwnRedis } from './helpers.js';

// A change whose Redis command was sent, then not confirmed in time (Redis holds it: paused, frozen,
// slow): it may be done. Its 503 says so (`maybeAccepted: true`), never "nothing was accepted" (before:
// a DELETE answered so was cancelled, and a mute answered so was applied).
describe('a change Redis does not confirm in time', () => {
  // The limiter's decision (a script: paused too) is let through, so that the change itself is what waits.
  const own = gatewayOnOwnRedis({
    HERALD_REDIS_TIMEOUT_MS: '200',
    HERALD_RATE_LIMIT_BURST: '100',
    HERALD_RATE_LIMIT_FAILURE: 'open',
  });

  async function whilePaused<T>(run: () => Promise<T>): Promise<T> {
    const admin = new Redis(own.redis.url);
    try {
      await admin.call('CLIENT', 'PAUSE', '700', 'WRITE');
      return await run();
    } finally {
      admin.disconnect();
    }
  }

  it('DELETE /notifications/:id: 503 maybeAccepted, and it was cancelled', async () => {
    const sent = await own.app.inject({
      method: 'POST',
      url: '/notify',
      headers: auth,
      payload: { userId: 'unsure', payload: {}, delayMs: 60_000 },
    });
    expect(sent.statusCode).toBe(202);
    const id = sent.json<{ id: string }>().id;
    const answer = await whilePaused(() =>
      own.app.inject({ method: 'DELETE', url: `/notifications/${id}`, headers: auth }),
    );
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE', maybeAccepted: true });
    expect(answer.json().error).not.toContain('nothing was accepted');
    // Sent again once Redis serves writes: the same answer as for any cancel (it was done).
    const again = await waitFor(
      async () => {
        const answer = await own.app.inject({ method: 'DELETE', url: `/notifications/${id}`, headers: auth });
        return answer.statusCode === 200 && answer;
      },
      { what: 'the cancel answered' },
    );
    expect(again.json()).toMatchObject({ status: 'cancelled' });
  });

  it('PUT mutes: 503 maybeAccepted', async () => {
    const answer = await whilePaused(() =>
      own.app.inject({
        method: 'PUT',
        url: '/users/unsure-mute/preferences/mutes',
        headers: auth,
        payload: { topics: ['promo'] },
      }),
    );
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE', maybeAccepted: true });
    expect(answer.statusCode).toBe(503);
  });
});
