import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { monitorArgs, monitorRedis } from '../src/monitor.js';
import { type RedisServerHandle, startRedisServer } from '../src/redis-server.js';
import { waitFor } from '../src/wait.js';

describe('monitorRedis', () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(() => server.dispose());

  it('reads MONITOR lines, escapes included', () => {
    expect(monitorArgs('+1796408679.338946 [0 127.0.0.1:40242] "client" "setname" "a b"')).toEqual([
      'client',
      'setname',
      'a b',
    ]);
    expect(monitorArgs('+1.0 [0 unix:/x] "set" "k\\"q\\"" "line\\nnext\\x00\\\\"')).toEqual([
      'set',
      'k"q"',
      'line\nnext\x00\\',
    ]);
    expect(monitorArgs('+1.0 [0 127.0.0.1:1] "ping"')).toEqual(['ping']);
  });

  it('starts on a busy server without taking its lines for replies, and sees every command in order', async () => {
    const client = new Redis(server.url);
    let stop = false;
    // A server that runs commands all the time: MONITOR's +OK shares its chunk with their lines.
    const busy = (async () => {
      while (!stop) await Promise.all(Array.from({ length: 20 }, () => client.ping()));
    })();
    const errors: unknown[] = [];
    const onError = (error: unknown) => errors.push(error);
    process.on('uncaughtException', onError);
    try {
      for (let round = 0; round < 20; round++) {
        const monitor = await monitorRedis(server.url);
        await client.set('monitored', `v"${round}`);
        await waitFor(
          () => monitor.commands.some(([command, , value]) => command === 'set' && value === `v"${round}`),
          {
            timeoutMs: 5000,
            what: 'the SET in MONITOR',
          },
        );
        monitor.close();
      }
    } finally {
      stop = true;
      await busy;
      process.off('uncaughtException', onError);
      client.disconnect();
    }
    expect(errors).toEqual([]);
  });
});
