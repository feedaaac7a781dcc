import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NOTIFY_JOB_NAME, type NotificationEvent, type NotificationJob, userRoom } from '@herald/protocol';
import { randomId, redisUrl, waitFor } from '@herald/testing';
import { createAdapter } from '@socket.io/redis-adapter';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Server } from 'socket.io';
import { io as connect } from 'socket.io-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { type NotificationWorker, startWorker } from '../src/worker.js';

describe('worker', () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  let queue: Queue<NotificationJob>;
  let worker: NotificationWorker;
  let port: number;
  const pubsubKey = randomId('pubsub');

  beforeEach(async () => {
    const config = loadConfig({
      REDIS_URL: redisUrl(),
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_PUBSUB_KEY: pubsubKey,
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    });
    worker = await startWorker(config, pino({ level: 'silent' }));
    queue = new Queue(config.queue.name, {
      prefix: config.queue.prefix,
      connection: { url: config.redisUrl },
    });
    cleanups.push(async () => {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
    });

    // A Socket.IO server on the same pub/sub channel, standing in for a realtime instance.
    const pub = new Redis(redisUrl());
    const sub = pub.duplicate();
    const http = createServer();
    const server = new Server(http, { adapter: createAdapter(pub, sub, { key: pubsubKey }) });
    server.on('connection', (socket) => {
      void socket.join(userRoom('default', String(socket.handshake.auth.userId)));
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    port = (http.address() as AddressInfo).port;
    cleanups.push(async () => {
      await server.close();
      pub.disconnect();
      sub.disconnect();
    });
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('pushes each job to the room of its user as a `notification` event and completes it', async () => {
    const client = connect(`http://127.0.0.1:${port}`, {
      auth: { userId: 'alice' },
      transports: ['websocket'],
    });
    const other = connect(`http://127.0.0.1:${port}`, { auth: { userId: 'bob' }, transports: ['websocket'] });
    cleanups.push(
      () => client.disconnect(),
      () => other.disconnect(),
    );
    const received: NotificationEvent[] = [];
    const receivedByOther: NotificationEvent[] = [];
    client.on('notification', (event) => received.push(event));
    other.on('notification', (event) => receivedByOther.push(event));
    await waitFor(() => client.connected && other.connected, { what: 'both clients connected' });

    const job: NotificationJob = {
      id: randomId('n'),
      userId: 'alice',
      payload: { text: 'hi' },
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, { jobId: job.id });

    await waitFor(() => received.length === 1, { what: 'the notification' });
    expect(received[0]).toEqual({
      ...job,
      offset: expect.stringMatching(/^\d+-1$/),
      unread: { count: 1, version: 1 },
    });
    await waitFor(async () => (await queue.getJobState(job.id)) === 'completed', {
      what: 'the job to complete',
    });
    expect(receivedByOther).toEqual([]);
  });

  it('completes a job for a user nobody is connected as', async () => {
    const job: NotificationJob = {
      id: randomId('n'),
      userId: 'nobody',
      payload: {},
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, { jobId: job.id });
    await waitFor(async () => (await queue.getJobState(job.id)) === 'completed', {
      what: 'the job to complete',
    });
  });
});
