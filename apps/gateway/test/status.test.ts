import { waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { auth, testAppForFile, workerOnEveryPartition } from './helpers.js';

const app = await testAppForFile({
  HERALD_JOB_ATTEMPTS: '2',
  HERALD_JOB_BACKOFF_MS: '1',
  HERALD_RATE_LIMIT_BURST: '1000',
});

async function send(userId: string): Promise<string> {
  const response = await app.inject({
    method: 'POST',
    url: '/notify',
    headers: auth,
    payload: { userId, payload: {} },
  });
  expect(response.statusCode).toBe(202);
  return response.json<{ id: string }>().id;
}

describe('GET /notifications/:id', () => {
  it('shows a queued notification with its attempts and creation time', async () => {
    const id = await send('status-user');
    const response = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(response.statusCode).toBe(200);
    const status = response.json<{ status: string; attempts: number; createdAt: string; userId: string }>();
    expect(status).toMatchObject({ id, userId: 'status-user', status: 'queued', attempts: 0 });
    expect(Number.isNaN(Date.parse(status.createdAt))).toBe(false);
  });

  it('is visible only to the tenant that sent it', async () => {
    const id = await send('status-user');
    const other = await app.apiKeys.create({ name: 'other', tenantId: 'other-tenant' });
    const response = await app.inject({
      method: 'GET',
      url: `/notifications/${id}`,
      headers: { authorization: `Bearer ${other.key}` },
    });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
  });

  it('404 for an unknown id, 401 without a key', async () => {
    expect((await app.inject({ method: 'GET', url: '/notifications/nope', headers: auth })).statusCode).toBe(
      404,
    );
    expect((await app.inject({ method: 'GET', url: '/notifications/nope' })).statusCode).toBe(401);
  });

  it('shows `failed` with attempts and the reason once every attempt failed', async () => {
    const id = await send('doomed');
    const worker = workerOnEveryPartition(
      app,
      async () => {
        throw new Error('push refused');
      },
      { settings: { backoffStrategy: () => 1 } },
    );
    try {
      const status = await waitFor(
        async () => {
          const response = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
          const body = response.json<{
            status: string;
            attempts: number;
            failedReason?: string;
            failedAt?: string;
          }>();
          return body.status === 'failed' ? body : undefined;
        },
        { timeoutMs: 20_000, what: 'the notification to fail' },
      );
      expect(status.attempts).toBe(2);
      expect(status.failedReason).toBe('push refused');
      expect(Number.isNaN(Date.parse(status.failedAt ?? ''))).toBe(false);
    } finally {
      await worker.close();
    }
  });
});
