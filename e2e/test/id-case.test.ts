import { redisUrl } from '@herald/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, appended, gatewayCall, notify, randomId, Stack, waitFor } from './support/stack.js';

// Notification ids are UUIDs, which RFC 9562 reads case-insensitively ("output as lowercase characters
// and are case insensitive on input"): a backend that kept one in a column that prints them in upper
// case (SQL Server's uniqueidentifier does) and sends it back must reach the same notification, by HTTP
// and over the socket, and be answered with the id as Herald wrote it.
describe('a notification id given in upper case', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.dispose();
    stack = undefined;
  });

  it('is the same notification: status, cancel, read and ack', async () => {
    stack = new Stack(redisUrl());
    const [gateway, realtime] = await Promise.all([
      stack.start('gateway', 'gw'),
      stack.start('realtime', 'rt'),
      stack.start('worker', 'worker'),
    ]);
    const user = randomId('upper');
    const [first, second] = await notify(gateway, user, 2);
    if (first === undefined || second === undefined) throw new Error('two ids expected');
    expect(first).toMatch(/^[0-9a-f-]+$/);
    await appended(gateway, user, second);

    const status = await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${first.toUpperCase()}`);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ id: first, userId: user, status: 'queued' });
    // Stored already: not cancellable, said of the same notification.
    const cancel = await gatewayCall(gateway.url, API_KEY, 'DELETE', `/notifications/${first.toUpperCase()}`);
    expect(cancel.status).toBe(409);

    const read = await gatewayCall(gateway.url, API_KEY, 'POST', `/users/${user}/notifications/read`, {
      body: { ids: [first.toUpperCase()] },
    });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ changed: 1 });

    const client = stack.client(user);
    await client.connect(realtime.url);
    expect(await client.command('ack', { ids: [second.toUpperCase()] })).toMatchObject({
      ok: true,
      changed: 1,
    });
    expect(await client.command('read', { ids: [second.toUpperCase()] })).toMatchObject({
      ok: true,
      changed: 1,
    });
    await waitFor(
      async () =>
        (await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${second}`)).body.status ===
        'delivered',
      { what: 'the upper-case ack recorded as a delivery' },
    );

    // A delayed one, cancelled by its upper-case id, is never stored.
    const delayed = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
      body: { userId: user, payload: {}, delayMs: 60_000 },
    });
    expect(delayed.status).toBe(202);
    const delayedId = String(delayed.body.id);
    const cancelled = await gatewayCall(
      gateway.url,
      API_KEY,
      'DELETE',
      `/notifications/${delayedId.toUpperCase()}`,
    );
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: delayedId, status: 'cancelled' });
  });
});
