import { type AppProcess, randomId, redisEnv, skewedClock, startApp, waitFor } from '@herald/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { entries, SECRET } from './support/stack.js';

interface Readiness {
  status: number;
  body: { code?: string; mismatches?: string[]; error?: string };
}

async function readiness(app: AppProcess): Promise<Readiness> {
  const response = await fetch(`${app.url}/readyz`);
  return { status: response.status, body: (await response.json()) as Readiness['body'] };
}

describe('a deployment fingerprint: /readyz names the settings the apps disagree on', () => {
  const processes: AppProcess[] = [];
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((app) => app.stop()));
  });

  function env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      // The run's Redis (on a Cluster run, its Cluster settings too); the names below are shared on purpose.
      ...redisEnv(),
      HERALD_API_KEYS: 'fingerprint-key-0123456789abcdef-0123456789',
      HERALD_JWT_SECRET: SECRET,
      HERALD_QUEUE_NAME: 'fingerprint-queue',
      HERALD_PUBSUB_KEY: 'fingerprint-pubsub',
      HERALD_INBOX_PREFIX: 'fingerprint-inbox:',
      ...extra,
    };
  }

  async function start(
    kind: 'gateway' | 'worker' | 'realtime',
    name: string,
    settings: Record<string, string>,
    clockSkew?: string,
  ) {
    const entry = entries[kind];
    const app = await startApp({
      name,
      entry,
      // Its wall clock off (libfaketime) by `clockSkew`, as on a machine without NTP.
      env: {
        HERALD_INSTANCE_ID: name,
        ...settings,
        ...(clockSkew === undefined ? {} : skewedClock(clockSkew)),
      },
    });
    processes.push(app);
    return app;
  }

  it('a worker on another queue and a realtime server with another JWT secret: every app says which, never the secret', async () => {
    const deployment = randomId('deployment');
    const otherSecret = 'another-secret-0123456789abcdef-0123456789';
    const [gateway, worker, realtime] = await Promise.all([
      start('gateway', 'gw-1', env({ HERALD_DEPLOYMENT: deployment })),
      start('worker', 'worker-1', env({ HERALD_DEPLOYMENT: deployment, HERALD_QUEUE_NAME: 'typo-queue' })),
      start('realtime', 'rt-1', env({ HERALD_DEPLOYMENT: deployment, HERALD_JWT_SECRET: otherSecret })),
    ]);
    await waitFor(async () => (await readiness(gateway)).body.mismatches?.length === 2, {
      what: 'the gateway names both mismatches',
    });
    const fromGateway = await readiness(gateway);
    expect(fromGateway.status).toBe(503);
    expect(fromGateway.body.code).toBe('HERALD_ERR_DEPLOYMENT_MISMATCH');
    expect(fromGateway.body.mismatches).toEqual([
      expect.stringMatching(
        /^HERALD_JWT_SECRET: this gateway \(gateway-.*\) has ".*", realtime rt-1 has ".*"$/,
      ),
      expect.stringMatching(/^HERALD_QUEUE_NAME: .*"fingerprint-queue", worker worker-1 has "typo-queue"$/),
    ]);
    // Realtime reads the queue name too (it enqueues webhook events beside the queue).
    await waitFor(async () => (await readiness(worker)).body.mismatches?.length === 2, {
      what: 'the worker names both apps on another queue',
    });
    const fromWorker = await readiness(worker);
    expect(fromWorker.status).toBe(503);
    expect(fromWorker.body.mismatches).toEqual([
      expect.stringMatching(
        /^HERALD_QUEUE_NAME: this worker \(worker-1\) has "typo-queue", gateway .* has "fingerprint-queue"$/,
      ),
      expect.stringMatching(
        /^HERALD_QUEUE_NAME: this worker \(worker-1\) has "typo-queue", realtime rt-1 has "fingerprint-queue"$/,
      ),
    ]);
    await waitFor(async () => (await readiness(realtime)).body.mismatches?.length === 2, {
      what: 'the realtime server names both mismatches',
    });
    const fromRealtime = await readiness(realtime);
    expect(fromRealtime.status).toBe(503);
    expect(fromRealtime.body.mismatches).toEqual([
      expect.stringMatching(/^HERALD_JWT_SECRET: this realtime \(rt-1\)/),
      expect.stringMatching(
        /^HERALD_QUEUE_NAME: this realtime \(rt-1\) has "fingerprint-queue", worker worker-1 has "typo-queue"$/,
      ),
    ]);
    // The secrets themselves appear nowhere.
    for (const answer of [fromGateway, fromWorker, fromRealtime]) {
      expect(JSON.stringify(answer.body)).not.toContain(SECRET);
      expect(JSON.stringify(answer.body)).not.toContain(otherSecret);
    }
  });

  it('apps that agree are ready; one that leaves is forgotten', async () => {
    const deployment = randomId('deployment');
    const [gateway, worker, realtime] = await Promise.all([
      start('gateway', 'gw-1', env({ HERALD_DEPLOYMENT: deployment })),
      start('worker', 'worker-1', env({ HERALD_DEPLOYMENT: deployment })),
      start('realtime', 'rt-1', env({ HERALD_DEPLOYMENT: deployment })),
    ]);
    for (const app of [gateway, worker, realtime]) expect((await readiness(app)).status).toBe(200);
    const odd = await start(
      'worker',
      'worker-odd',
      env({ HERALD_DEPLOYMENT: deployment, HERALD_PUBSUB_KEY: 'odd' }),
    );
    await waitFor(async () => (await readiness(realtime)).status === 503, {
      what: 'realtime sees the odd worker',
    });
    await odd.stop();
    await waitFor(async () => (await readiness(realtime)).status === 200, {
      what: 'the odd worker left the deployment',
    });
  });

  it('a worker whose clock is 45 s behind is still heard: its other queue name is named', async () => {
    const deployment = randomId('deployment');
    const [gateway] = await Promise.all([
      start('gateway', 'gw-1', env({ HERALD_DEPLOYMENT: deployment })),
      // Its heartbeats used to look 45 s old to everyone else, so it was taken for gone and ignored.
      start(
        'worker',
        'worker-behind',
        env({ HERALD_DEPLOYMENT: deployment, HERALD_QUEUE_NAME: 'typo-queue' }),
        '-45s',
      ),
    ]);
    await waitFor(async () => (await readiness(gateway)).status === 503, {
      what: 'the gateway names the worker behind',
    });
    expect((await readiness(gateway)).body.mismatches).toEqual([
      expect.stringMatching(
        /^HERALD_QUEUE_NAME: .*"fingerprint-queue", worker worker-behind has "typo-queue"$/,
      ),
    ]);
  });
});
