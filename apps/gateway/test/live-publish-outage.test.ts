import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Inbox } from '@herald/inbox';
import {
  type AppProcess,
  type RedisServerHandle,
  randomId,
  startApp,
  startRedisServer,
  waitFor,
} from '@herald/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe.each(['classic', 'sharded'])(
  'a live publish that fails never takes the gateway down (%s pub/sub)',
  (mode) => {
    let redis: RedisServerHandle;
    let gateway: AppProcess;
    let inbox: Inbox;
    let admin: Redis;
    const prefix = `${randomId('inbox')}:`;

    beforeAll(async () => {
      redis = await startRedisServer();
      admin = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      admin.on('error', () => {});
      await admin.connect();
      inbox = new Inbox(admin, { prefix, maxLength: 100 });
      gateway = await startApp({
        name: 'gateway',
        entry,
        env: testEnv({ REDIS_URL: redis.url, HERALD_INBOX_PREFIX: prefix, HERALD_PUBSUB_MODE: mode }),
      });
    });
    afterAll(async () => {
      await gateway?.stop();
      admin?.disconnect();
      await redis?.dispose();
    });

    const markRead = (userId: string, ids: string[]) =>
      fetch(`${gateway.url}/users/${userId}/notifications/read`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ids }),
      });
    const alive = async () => (await fetch(`${gateway.url}/healthz`)).status < 600;

    it('starts without a deprecation or other warning from Node or Fastify', () => {
      expect(gateway.lines.filter((line) => /Deprecat|FSTDEP|FSTWRN|Warning/.test(line))).toEqual([]);
    });

    it('survives a publish Redis refuses, and a REST read while Redis is down', async () => {
      const id = randomUUID();
      await inbox.append({ id, userId: 'live', payload: {}, createdAt: new Date().toISOString() });
      // The inbox write succeeds and only the publish of the new unread count fails.
      await admin.call('ACL', 'SETUSER', 'default', '-publish', '-spublish');
      const read = await markRead('live', [id]);
      expect(read.status).toBe(200);
      expect(await read.json()).toMatchObject({ changed: 1 });
      // Another request answered: the process did not die of the rejected publish.
      expect(await alive()).toBe(true);
      expect(gateway.process.exitCode).toBeNull();
      // The log line comes through the child's stdout, possibly after the answer: poll for it.
      await waitFor(() => gateway.lines.some((line) => line.includes('live publish failed')), {
        what: 'the live publish failure logged',
      });

      await redis.stop();
      const during = await markRead('live', [id]);
      expect(during.status).toBe(503);
      expect(await alive()).toBe(true);
      expect(gateway.process.exitCode).toBeNull();
    });
  },
);
