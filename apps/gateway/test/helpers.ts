import { queuePartitions } from '@herald/config';
import type { NotificationJob } from '@herald/protocol';
import { isolatedEnv, queueConnection, type RedisServerHandle, startRedisServer } from '@herald/testing';
import { type Job, type Processor, Queue, Worker, type WorkerOptions } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { checkAgainstOpenApi, contractProblems } from './openapi-contract.js';

// 32+ bytes each, as the gateway requires outside development mode.
export const API_KEY = 'test-key-1-0123456789abcdef0123456789';
export const API_KEY_2 = 'test-key-2-0123456789abcdef0123456789';
export const JWT_SECRET = 'test-secret-0123456789abcdef0123456789';

/**
 * Environment of a gateway on the test Redis with its own queue, limiter and key prefixes. One job per
 * notification (`HERALD_ENVELOPE_WINDOW_MS=0`), which these tests read by its id; envelopes (the default)
 * have their own tests (envelopes.test.ts, fuzz.test.ts, and the end-to-end tests).
 */
export function testEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    ...isolatedEnv(),
    HERALD_API_KEYS: `${API_KEY},${API_KEY_2}`,
    HERALD_JWT_SECRET: JWT_SECRET,
    HERALD_ENVELOPE_WINDOW_MS: '0',
    ...env,
  };
}

/**
 * A gateway built for `inject()`. Every answer it sends is checked against its own `/openapi.json`
 * (status, Herald headers, JSON body): `disposeTestApp` fails the test on any mismatch.
 */
export async function buildTestApp(env: Record<string, string> = {}): Promise<FastifyInstance> {
  const app = await buildApp(loadConfig(testEnv({ HERALD_LOG_LEVEL: 'silent', ...env })));
  checkAgainstOpenApi(app);
  return app;
}

/** Closes `app` after removing what it wrote to Redis; fails if an answer contradicted /openapi.json. */
export async function disposeTestApp(app: FastifyInstance): Promise<void> {
  await Promise.all(app.queues.map((queue) => queue.obliterate({ force: true }).catch(() => {})));
  await app.fanoutQueue.obliterate({ force: true }).catch(() => {});
  await app.close();
  const problems = contractProblems(app);
  if (problems.length > 0)
    throw new Error(`Answers that /openapi.json does not document:\n${problems.join('\n')}`);
}

/**
 * buildTestApp() for the test file that awaits it at its top level: one gateway for the file's tests,
 * disposed after them (`disposeTestApp`, so its answers are checked against /openapi.json).
 *
 * @example
 * ```ts
 * const app = await testAppForFile({ HERALD_RATE_LIMIT_BURST: '1000' });
 * ```
 */
export async function testAppForFile(env: Record<string, string> = {}): Promise<FastifyInstance> {
  const app = await buildTestApp(env);
  afterAll(() => disposeTestApp(app));
  return app;
}

export const auth = { authorization: `Bearer ${API_KEY}` };

/** `POST /notify` of `payload` as it is (a string: not re-serialised), authenticated, as `contentType`. */
export async function postRaw(app: FastifyInstance, payload: string, contentType = 'application/json') {
  return await app.inject({
    method: 'POST',
    url: '/notify',
    headers: { ...auth, 'content-type': contentType },
    payload,
  });
}

/**
 * A gateway on a `redis-server` of its own (for outages the test causes), built in `beforeAll` and
 * disposed in `afterAll` (a frozen Redis is resumed first). Read `.app` and `.redis` inside tests.
 */
export function gatewayOnOwnRedis(env: Record<string, string> = {}): {
  app: FastifyInstance;
  redis: RedisServerHandle;
} {
  const handle = {} as { app: FastifyInstance; redis: RedisServerHandle };
  beforeAll(async () => {
    handle.redis = await startRedisServer();
    handle.app = await buildTestApp({ REDIS_URL: handle.redis.url, ...env });
  });
  afterAll(async () => {
    handle.redis.process.kill('SIGCONT');
    await disposeTestApp(handle.app).catch(() => {});
    await handle.redis.dispose();
  });
  return handle;
}

type JobType = Parameters<Queue['getJobs']>[0];
type CountType = Parameters<Queue['getJobCountByTypes']>[number];

/**
 * The gateway's notification queue read as one, whichever partition (`HERALD_QUEUE_PARTITIONS`, 3 on a
 * Redis Cluster run) holds a job: a test finds a job by its id, counts and lists every partition's. With
 * one partition it is that queue's own answers.
 *
 * @example
 * ```ts
 * const job = await everyPartition(app).getJob(id);
 * ```
 */
export function everyPartition(app: FastifyInstance) {
  const queues = app.queues;
  const sum = async (count: (queue: Queue<NotificationJob>) => Promise<number>): Promise<number> =>
    (await Promise.all(queues.map(count))).reduce((a, b) => a + b, 0);
  return {
    async getJob(id: string): Promise<Job<NotificationJob> | undefined> {
      for (const queue of queues) {
        const job = await queue.getJob(id);
        if (job) return job;
      }
      return undefined;
    },
    async getJobState(id: string): Promise<string> {
      for (const queue of queues) {
        const state = await queue.getJobState(id);
        if (state !== 'unknown') return state;
      }
      return 'unknown';
    },
    count: () => sum((queue) => queue.count()),
    getJobCountByTypes: (...types: CountType[]) => sum((queue) => queue.getJobCountByTypes(...types)),
    async getJobCounts(...types: CountType[]): Promise<Record<string, number>> {
      const counts: Record<string, number> = {};
      for (const each of await Promise.all(queues.map((queue) => queue.getJobCounts(...types))))
        for (const [type, n] of Object.entries(each)) counts[type] = (counts[type] ?? 0) + n;
      return counts;
    },
    async getJobs(types?: JobType): Promise<Job<NotificationJob>[]> {
      return (await Promise.all(queues.map((queue) => queue.getJobs(types)))).flat();
    },
    async getFailed(start?: number, end?: number): Promise<Job<NotificationJob>[]> {
      return (await Promise.all(queues.map((queue) => queue.getFailed(start, end)))).flat();
    },
  };
}

/**
 * A queue per partition of the notification queue of `env` (its `HERALD_QUEUE_NAME` and
 * `HERALD_QUEUE_PARTITIONS`), on the run's Redis: for a test that reads what a gateway process enqueued.
 */
export function partitionQueues(env: Record<string, string>): Queue<NotificationJob>[] {
  return queuePartitions({
    name: env.HERALD_QUEUE_NAME ?? '',
    prefix: '{herald}',
    partitions: Number(env.HERALD_QUEUE_PARTITIONS ?? 1),
  }).map(({ name, prefix }) => new Queue<NotificationJob>(name, { prefix, connection: queueConnection() }));
}

/**
 * A BullMQ worker of the test's own on every partition of `app`'s queue, running `processor` (e.g. one
 * that fails, to fill the failed set); `close()` them after.
 */
export function workerOnEveryPartition(
  app: FastifyInstance,
  processor: Processor<NotificationJob>,
  options: Omit<WorkerOptions, 'connection' | 'prefix'> = {},
): { close(): Promise<void> } {
  const workers = app.queues.map(
    (queue) =>
      new Worker<NotificationJob>(queue.name, processor, {
        ...options,
        prefix: queue.opts.prefix ?? '',
        connection: queueConnection(),
      }),
  );
  return {
    // Without waiting for a blocking fetch in flight (on a Cluster, waiting for it can outlast a test).
    close: async () => {
      await Promise.all(workers.map((worker) => worker.close(true)));
    },
  };
}
