import type { AddressInfo } from 'node:net';
import { createServer, type Socket } from 'node:net';
import { startRedisServer, waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { run as failed } from '../src/failed.js';
import { run as inbox } from '../src/inbox.js';
import type { CliIo, Env } from '../src/io.js';
import { run as keys } from '../src/keys.js';
import { run as limits } from '../src/limits.js';
import { run as webhooks } from '../src/webhooks.js';
import { testEnv } from './helpers.js';

type Command = (args: string[], io: CliIo, env: Env) => Promise<number>;

const commands: [string, Command, string[]][] = [
  ['keys list', keys, ['list']],
  ['keys create', keys, ['create', '--name', 'shop', '--tenant', 'acme']],
  ['limits peek', limits, ['peek', '--user', 'alice']],
  ['webhooks list', webhooks, ['list']],
  ['inbox migrate', inbox, ['migrate', '--tenant', 'acme', '--dry-run']],
  ['failed list', failed, ['list']],
];

async function cli(command: Command, args: string[], env: Env) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await command(args, { out: (line) => out.push(line), err: (line) => err.push(line) }, env);
  return { code, out, err: err.join('\n') };
}

describe('every command reads its settings as the apps do', () => {
  it.each(commands)(
    '%s: a setting that is wrong is a line naming it, exit 1, never a stack trace',
    async (_name, command, args) => {
      const answer = await cli(command, args, { REDIS_URL: 'notaurl' });
      expect(answer.code).toBe(1);
      expect(answer.out).toEqual([]);
      expect(answer.err).toContain('REDIS_URL must be a redis:// or rediss:// URL');
      expect(answer.err).not.toMatch(/^\s+at /m);
    },
  );

  it('says why Redis refused it: a wrong password, none, a database it does not have', async () => {
    const redis = await startRedisServer({ password: 'the-right-password-0123456789' });
    try {
      const port = new URL(redis.url).port;
      for (const [url, expected] of [
        [`redis://:wrong@127.0.0.1:${port}`, /Redis refused the credentials of REDIS_URL \(WRONGPASS/],
        [`redis://127.0.0.1:${port}`, /Redis refused the credentials of REDIS_URL \(NOAUTH/],
        [`redis://:the-right-password-0123456789@127.0.0.1:${port}/99`, /DB index is out of range/],
      ] as const) {
        // That Redis alone, on a Cluster run too (whose settings name the Cluster's nodes).
        const answer = await cli(keys, ['list'], {
          ...testEnv(),
          HERALD_REDIS_CLUSTER_NODES: undefined,
          REDIS_URL: url,
        });
        expect(answer.code, url).toBe(1);
        expect(answer.err, url).toMatch(expected);
        expect(answer.err, url).not.toContain('the-right-password');
      }
    } finally {
      await redis.dispose();
    }
  });

  // Every command connects through connectForCli: one of them (its deadline is 5 s; all six passed).
  it.each(commands.slice(0, 1))(
    '%s: a Redis that accepts the connection and never answers (frozen) is exit 1 with a line saying so, not a hang',
    async (_name, command, args) => {
      const sockets: Socket[] = [];
      const silent = createServer((socket) => {
        sockets.push(socket);
        socket.on('error', () => {});
      });
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = silent.address() as AddressInfo;
        const answer = await cli(command, args, {
          ...testEnv(),
          HERALD_REDIS_CLUSTER_NODES: undefined,
          REDIS_URL: `redis://127.0.0.1:${port}`,
        });
        expect(answer.code).toBe(1);
        expect(answer.err).toMatch(/did not answer within \d+ s/);
        expect(answer.err).not.toMatch(/^\s+at /m);
      } finally {
        for (const socket of sockets) socket.destroy();
        silent.close();
      }
    },
    30_000,
  );

  it('a refused connection leaves no timer behind (the process exits at once, not 5 s later)', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const answer = await cli(keys, ['list'], {
      ...testEnv(),
      HERALD_REDIS_CLUSTER_NODES: undefined,
      REDIS_URL: 'redis://127.0.0.1:9',
    });
    expect(answer.code).toBe(1);
    // ioredis clears its own as it ends; the CLI's 5 s deadline was left running, holding the process.
    await waitFor(() => timers() <= before, { timeoutMs: 1000, what: 'no timer left' });
  });

  it('warns of a HERALD_ variable that is no setting (a typo), naming the nearest, as the apps do', async () => {
    const answer = await cli(keys, ['list'], { ...testEnv(), HERALD_KEY_PREFX: 'x:' });
    expect(answer.code).toBe(0);
    expect(answer.err).toContain(
      'HERALD_KEY_PREFX is not a Herald setting and is ignored: did you mean HERALD_KEY_PREFIX?',
    );
  });
});
