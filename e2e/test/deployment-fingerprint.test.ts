import {
  type AppProcess,
  randomId,
  redisEnv,
  skewedClock,
  startApp,
  testRedis,
  waitFor,
} from '@herald/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
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
  const redis = testRedis();
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((app) => app.stop()));
  });
  afterAll(() => redis.disconnect());

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

  /** The instances registered in `deployment` (its fingerprint hash). */
  async function registered(deployment: string): Promise<string[]> {
    return redis.hkeys(`herald:deployment:{${deployment}}`);
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

  it('a worker on another queue and a realtime server with another JWT secret, started after the gateway: each says which, the gateway stays ready, never the secret', async () => {
    const deployment = randomId('deployment');
    const otherSecret = 'another-secret-0123456789abcdef-0123456789';
    // One at a time: who joined first decides who is out of step.
    const gateway = await start('gateway', 'gw-1', env({ HERALD_DEPLOYMENT: deployment }));
    // The gateway names itself (gateway-<id>), whatever HERALD_INSTANCE_ID says.
    await waitFor(async () => (await registered(deployment)).length === 1, {
      what: 'the gateway registered',
    });
    const realtime = await start(
      'realtime',
      'rt-1',
      env({ HERALD_DEPLOYMENT: deployment, HERALD_JWT_SECRET: otherSecret }),
    );
    await waitFor(async () => (await registered(deployment)).includes('rt-1'), {
      what: 'realtime registered',
    });
    const worker = await start(
      'worker',
      'worker-1',
      env({ HERALD_DEPLOYMENT: deployment, HERALD_QUEUE_NAME: 'typo-queue' }),
    );
    await waitFor(async () => (await registered(deployment)).includes('worker-1'), {
      what: 'the worker registered',
    });
    await waitFor(async () => (await readiness(worker)).body.mismatches?.length === 2, {
      what: 'the worker names both apps on another queue',
    });
    const fromWorker = await readiness(worker);
    expect(fromWorker.status).toBe(503);
    expect(fromWorker.body.code).toBe('HERALD_ERR_DEPLOYMENT_MISMATCH');
    expect(fromWorker.body.mismatches).toEqual([
      expect.stringMatching(
        /^HERALD_QUEUE_NAME: this worker \(worker-1\) has "typo-queue", gateway gateway-\S+ has "fingerprint-queue"$/,
      ),
      expect.stringMatching(
        /^HERALD_QUEUE_NAME: this worker \(worker-1\) has "typo-queue", realtime rt-1 has "fingerprint-queue"$/,
      ),
    ]);
    // Realtime joined after the gateway (another secret): it says so; the worker joined after it.
    const fromRealtime = await readiness(realtime);
    expect(fromRealtime.status).toBe(503);
    expect(fromRealtime.body.mismatches).toEqual([
      expect.stringMatching(
        /^HERALD_JWT_SECRET: this realtime \(rt-1\) has ".*", gateway gateway-\S+ has ".*"$/,
      ),
    ]);
    // The gateway joined first: it stays ready (one misconfigured newcomer does not take it out).
    const fromGateway = await readiness(gateway);
    expect(fromGateway.status).toBe(200);
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
    // The odd one, which joined last, is the one kept out; the others stay ready.
    await waitFor(async () => (await readiness(odd)).status === 503, { what: 'the odd worker says so' });
    expect((await readiness(odd)).body.mismatches).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^HERALD_PUBSUB_KEY: this worker \(worker-odd\) has "odd"/),
      ]),
    );
    expect(await registered(deployment)).toContain('worker-odd');
    for (const app of [gateway, worker, realtime]) expect((await readiness(app)).status).toBe(200);
    await odd.stop();
    await waitFor(async () => !(await registered(deployment)).includes('worker-odd'), {
      what: 'the odd worker left the deployment',
    });
  });

  it('a worker whose clock is 45 s behind is still heard: its other queue name is named', async () => {
    const deployment = randomId('deployment');
    // Its heartbeats used to look 45 s old to everyone else, so it was taken for gone and ignored. It
    // joins first: the gateway after it is the one out of step, and must hear it.
    await start(
      'worker',
      'worker-behind',
      env({ HERALD_DEPLOYMENT: deployment, HERALD_QUEUE_NAME: 'typo-queue' }),
      '-45s',
    );
    await waitFor(async () => (await registered(deployment)).includes('worker-behind'), {
      what: 'the worker registered',
    });
    const gateway = await start('gateway', 'gw-1', env({ HERALD_DEPLOYMENT: deployment }));
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
