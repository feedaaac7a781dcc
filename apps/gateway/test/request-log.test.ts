import { fileURLToPath } from 'node:url';
import { type AppProcess, randomId, startApp, waitFor } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, partitionQueues, testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

// The README: one line per request at info, `request completed`, and for a send its notificationIds and
// tenant: a topic send and a broadcast too, and a replayed one (its first answer's ids).
describe('the request log line of a send', () => {
  const env = testEnv();
  const queues = partitionQueues(env);
  let gateway: AppProcess;
  beforeAll(async () => {
    gateway = await startApp({ name: 'gateway', entry, env });
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all(queues.map((queue) => queue.obliterate({ force: true })));
    await Promise.all(queues.map((queue) => queue.close()));
  });

  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const reqId = randomId('req');
    const response = await fetch(`${gateway.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${API_KEY}`,
        'content-type': 'application/json',
        'x-request-id': reqId,
        ...headers,
      },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(202);
    return { reqId, body: (await response.json()) as { id: string } };
  };

  const lineOf = (reqId: string) =>
    waitFor(
      () =>
        gateway.lines
          .filter((line) => line.includes('"msg":"request completed"'))
          .map((line) => JSON.parse(line) as { reqId: string; notificationIds?: string[]; tenant?: string })
          .find((line) => line.reqId === reqId),
      { what: `the line of ${reqId}` },
    );

  it('carries the id of a topic send, a broadcast and a replay', async () => {
    const key = randomId('idem');
    const sends = [
      await post('/notify', { topic: randomId('topic'), payload: {} }),
      await post('/notify', { broadcast: true, payload: {} }),
      await post('/notify', { userId: 'logged', payload: {} }, { 'idempotency-key': key }),
      await post('/notify', { userId: 'logged', payload: {} }, { 'idempotency-key': key }),
    ];
    for (const { reqId, body } of sends) {
      expect(await lineOf(reqId)).toMatchObject({ notificationIds: [body.id], tenant: 'default' });
    }
  });
});
