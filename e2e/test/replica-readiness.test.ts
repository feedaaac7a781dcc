import { startRedisServer } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { API_KEY, randomId, Stack, waitFor } from './support/stack.js';

// HERALD_REDIS_WAIT_REPLICAS=1 on a Redis without a replica (none set up, or gone): every send is refused
// (the gateway's WAIT cannot be met, the worker pushes nothing live), so /readyz must not say ready, and
// must name the setting; once a replica is in sync it says ready again and sends go through.
describe('HERALD_REDIS_WAIT_REPLICAS with fewer replicas than asked', () => {
  it('/readyz of the gateway and the worker is 503 naming the setting, 200 once a replica is there, 503 while it is frozen', async () => {
    const primary = await startRedisServer();
    const stack = new Stack(primary.url, { HERALD_REDIS_WAIT_REPLICAS: '1' });
    let replica: Awaited<ReturnType<typeof startRedisServer>> | undefined;
    try {
      const [gateway, worker] = await Promise.all([
        stack.start('gateway', 'gw'),
        stack.start('worker', 'worker'),
      ]);
      for (const app of [gateway, worker]) {
        const response = await fetch(`${app.url}/readyz`);
        expect(response.status, app.name).toBe(503);
        expect(((await response.json()) as { error: string }).error, app.name).toMatch(
          /0 of the 1 replica\(s\) asked for \(HERALD_REDIS_WAIT_REPLICAS\)/,
        );
      }
      // A send is answered 503 (on one Redis the job is added, then WAIT times out: maybe accepted), and the
      // gateway says why in its log, naming the setting, once for the three (before: a line per request,
      // each saying only "Redis did not answer within 800 ms").
      const refusedSend = () =>
        fetch(`${gateway.url}/notify`, {
          method: 'POST',
          headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ userId: randomId('refused'), payload: {} }),
        });
      for (let n = 0; n < 3; n++) expect((await refusedSend()).status).toBe(503);
      const warnings = () =>
        gateway.lines.filter(
          (line) => line.includes('"level":40') && line.includes('HERALD_REDIS_WAIT_REPLICAS'),
        );
      await waitFor(() => warnings().length > 0, { what: 'a warning naming the setting' });
      expect(warnings().length).toBe(1);
      replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
      for (const app of [gateway, worker])
        await waitFor(async () => (await fetch(`${app.url}/readyz`)).status === 200, {
          timeoutMs: 10_000,
          what: `${app.name} ready once the replica is in sync`,
        });
      // Sent as a client should: a 503 (WAIT not met in time, which a loaded machine can make of the
      // replica's first acknowledgement) is retried with the same Idempotency-Key, and it is stored once.
      const user = randomId('replicated');
      const key = randomId('replicated-key');
      const sendOnce = () =>
        fetch(`${gateway.url}/notify`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${API_KEY}`,
            'content-type': 'application/json',
            'idempotency-key': key,
          },
          body: JSON.stringify({ userId: user, payload: {} }),
        });
      let sent = await sendOnce();
      await waitFor(
        async () => {
          if (sent.status !== 503) return true;
          await sent.body?.cancel();
          sent = await sendOnce();
          return sent.status !== 503;
        },
        { timeoutMs: 10_000, what: 'a send accepted once the replica is in sync' },
      );
      expect(sent.status).toBe(202);
      const { id } = (await sent.json()) as { id: string };
      await waitFor(async () => (await stack.inboxIds(user)).length === 1, { what: 'stored' });
      expect(await stack.inboxIds(user)).toEqual([id]);

      // A replica that stops acknowledging (frozen) is no replica for WAIT: every send would time out.
      replica.process.kill('SIGSTOP');
      try {
        for (const app of [gateway, worker])
          await waitFor(async () => (await fetch(`${app.url}/readyz`)).status === 503, {
            timeoutMs: 10_000,
            what: `${app.name} not ready while its replica acknowledges nothing`,
          });
      } finally {
        replica.process.kill('SIGCONT');
      }
      await waitFor(async () => (await fetch(`${gateway.url}/readyz`)).status === 200, {
        timeoutMs: 10_000,
        what: 'ready again once the replica acknowledges',
      });
    } finally {
      await stack.dispose();
      await replica?.dispose();
      await primary.dispose();
    }
  }, 60_000);
});
