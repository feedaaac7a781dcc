import { type NotificationEvent, PAYLOAD_MAX_DEPTH } from '@herald/protocol';
import { type AppProcess, randomId, redisUrl, waitFor } from '@herald/testing';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, stackEnv, startApps, TRIO } from './support/stack.js';

const nest = (depth: number, open: string, close: string, leaf: string) =>
  `${open.repeat(depth)}${leaf}${close.repeat(depth)}`;

/**
 * Payloads at the edges of what the gateway accepts, as raw JSON text: each must reach a real
 * socket.io-client through the worker and a realtime process exactly as JSON carries it.
 */
const ACCEPTED: Record<string, string> = {
  'objects at the depth limit': `{"n":${nest(PAYLOAD_MAX_DEPTH - 1, '{"a":', '}', '1')}}`,
  'arrays at the depth limit': `{"n":${nest(PAYLOAD_MAX_DEPTH - 1, '[', ']', '"x"')}}`,
  'wide: 1,500 keys': `{${Array.from({ length: 1500 }, (_, i) => `"${i.toString(36)}":0`).join(',')}}`,
  'wide: an array of 5,000 items': `{"a":[${'0,'.repeat(4999)}0]}`,
  'a 15,000-character key': `{"${'k'.repeat(15_000)}":true}`,
  'numbers at the edges':
    '{"max":9007199254740991,"min":-9007199254740991,"tiny":5e-324,"neg":-0,"e":1.5E-300,"f":0.1}',
  'unicode: astral, separators, NUL, escapes':
    '{"s":"😀 \\ud83d\\ude00 \\u2028\\u2029 \\u0000 \\"\\\\ é","😀":"key"}',
  'duplicate keys (the last wins)': '{"a":1,"a":2}',
  'an empty object and an empty key': '{"":{},"e":[]}',
};
const REFUSED: Record<string, string> = {
  'one level too deep': `{"n":${nest(PAYLOAD_MAX_DEPTH, '[', ']', '1')}}`,
  '3,000 levels (overflowed msgpack in the worker: a poison job)': `{"n":${nest(3000, '[', ']', '1')}}`,
  '1e400 (Infinity)': '{"n":1e400}',
  '2^53 + 1 (JSON.parse rounds it)': '{"n":9007199254740993}',
  '1e21 (msgpack corrupted it to 3875820019684212700)': '{"n":1e21}',
  'the largest double (msgpack made it 0)': '{"n":1.7976931348623157e308}',
  '-1e19': '{"n":-1e19}',
  'a lone surrogate': '{"s":"\\ud800"}',
  __proto__: '{"__proto__":{"admin":true}}',
};

describe('hostile but valid payloads reach a real client through the worker and realtime, exactly as sent', () => {
  const processes: AppProcess[] = [];
  let gateway: AppProcess;
  let realtime: AppProcess;
  let socket: Socket | undefined;

  beforeAll(async () => {
    const env = stackEnv(redisUrl(), { HERALD_RATE_LIMIT_BURST: '1000' });
    ({ gateway, realtime } = await startApps(env, TRIO, processes));
  });
  afterAll(async () => {
    socket?.disconnect();
    await Promise.all(processes.map((process) => process.stop()));
  });

  const post = (userId: string, payload: string) =>
    fetch(`${gateway.url}/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: `{"userId":${JSON.stringify(userId)},"payload":${payload}}`,
    });

  it('every accepted payload arrives as JSON carries it; the refused ones are 400s naming the field', async () => {
    const userId = randomId('hostile');
    const tokenResponse = await fetch(`${gateway.url}/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId }),
    });
    const { token } = (await tokenResponse.json()) as { token: string };
    const received: NotificationEvent[] = [];
    socket = io(realtime.url, {
      auth: { token },
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
    });
    socket.on('notification', (event: NotificationEvent) => received.push(event));
    await new Promise<void>((resolve, reject) => {
      socket?.once('connect', () => resolve());
      socket?.once('connect_error', reject);
    });

    for (const [what, payload] of Object.entries(REFUSED)) {
      const response = await post(userId, payload);
      expect(response.status, what).toBe(400);
      const body = (await response.json()) as { code: string; details: { field: string }[] };
      expect(body.code, what).toBe('HERALD_ERR_VALIDATION');
      expect(body.details[0]?.field, what).toMatch(/^body\.payload/);
    }

    const expected = new Map<string, { what: string; json: string }>();
    for (const [what, payload] of Object.entries(ACCEPTED)) {
      const response = await post(userId, payload);
      expect(response.status, `${what}: ${await response.clone().text()}`).toBe(202);
      const { id } = (await response.json()) as { id: string };
      expected.set(id, { what, json: JSON.stringify(JSON.parse(payload)) });
    }
    await waitFor(() => received.length >= expected.size, {
      timeoutMs: 30_000,
      what: `${expected.size} notifications on the client`,
    });
    for (const event of received) {
      const sent = expected.get(event.id);
      expect(sent, event.id).toBeDefined();
      expect(JSON.stringify(event.payload), sent?.what).toBe(sent?.json);
    }
    expect(received.map((event) => event.id).sort()).toEqual([...expected.keys()].sort());
    const failed = processes.flatMap((process) =>
      process.lines.filter((line) => line.includes('attempt failed')),
    );
    expect(failed).toEqual([]);
  });
});
