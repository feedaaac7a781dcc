import {
  type AppProcess,
  expectHealthThroughOutage,
  type RedisServerHandle,
  scrapeMetrics,
  startRedisServer,
} from '@herald/testing';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Stack } from './support/stack.js';

describe('realtime liveness, readiness and metrics (a real process on a Redis of its own)', () => {
  let redis: RedisServerHandle;
  let stack: Stack;
  let realtime: AppProcess;

  beforeAll(async () => {
    redis = await startRedisServer();
    stack = new Stack(redis.url);
    realtime = await stack.start('realtime', 'rt-health');
  });
  afterAll(async () => {
    await stack?.dispose();
    await redis?.dispose();
  });

  const counter = (families: Awaited<ReturnType<typeof scrapeMetrics>>, name: string, code?: string) =>
    families.get(name)?.metrics.find((m) => code === undefined || m.labels?.code === code)?.value;

  it('counts connected sockets, refused handshakes by code and delivered notifications', async () => {
    const refused = io(realtime.url, {
      auth: { token: 'forged' },
      transports: ['websocket'],
      reconnection: false,
    });
    await new Promise<void>((resolve) => refused.once('connect_error', () => resolve()));
    refused.disconnect();

    await stack.inbox.append({
      id: 'n-1',
      userId: 'alice',
      payload: {},
      createdAt: new Date().toISOString(),
    });
    const alice = stack.client('alice');
    await alice.connect(realtime.url, '0-0');
    expect(alice.received.map((n) => n.id)).toEqual(['n-1']);

    const families = await scrapeMetrics(`${realtime.url}/metrics`);
    expect(counter(families, 'herald_realtime_sockets')).toBe('1');
    expect(counter(families, 'herald_realtime_handshakes_refused_total', 'HERALD_ERR_TOKEN_INVALID')).toBe(
      '1',
    );
    expect(counter(families, 'herald_realtime_notifications_delivered_total')).toBe('1');
  });

  it('/healthz stays 200 while Redis is down; /readyz answers 503 JSON then, 200 once Redis is back', async () => {
    await expectHealthThroughOutage(realtime.url, redis, {
      metric: 'herald_realtime_sockets',
      health: { instanceId: 'rt-health' },
    });
  });
});
