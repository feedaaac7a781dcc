import { NOTIFY_ENVELOPE_JOB_NAME } from '@herald/protocol';
import { PRIORITY_LIMIT } from 'bullmq';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { Envelopes } from '../src/envelopes.js';
import { RedisTimeoutError } from '../src/errors.js';
import { addDurably } from '../src/plugins/app/notifications.js';
import { JobRefusedError } from '../src/queue-jobs.js';
import { everyPartition, testAppForFile } from './helpers.js';

// One job per notification (the helpers' default): the jobs a send adds are its own.
const app: FastifyInstance = await testAppForFile();

/** A request of the default tenant as the enqueue services read it, with what it logs. */
function request(idempotent = false) {
  const lines: { level: string; object: { err?: Error }; message: string }[] = [];
  const at =
    (level: string) =>
    (object: { err?: Error }, message = '') =>
      lines.push({ level, object, message });
  const log = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
  const fake = {
    identity: { id: 'refusal-test', name: 'refusal test', tenantId: 'default', limits: {} },
    log,
    ...(idempotent ? { idempotency: { derivedId: crypto.randomUUID() } } : {}),
  };
  return { request: fake as unknown as FastifyRequest, lines };
}

/** What `promise` rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<{
  statusCode?: number;
  code?: string;
  message: string;
  extra?: Record<string, unknown>;
}> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error as { message: string },
  );
}

// Beyond BullMQ's largest priority: the route schemas refuse it now (400), so it is sent to the
// enqueue services directly, as a defect letting a job BullMQ refuses through would.
const BEYOND = PRIORITY_LIMIT + 1;

describe('a job BullMQ refuses before sending anything (a gateway defect)', () => {
  it('a send: 500 with nothing accepted (never "maybeAccepted"), logged at error level with BullMQ\'s reason; nothing stored, even of the batch\'s other items', async () => {
    const { request: sender, lines } = request(true);
    const error = await rejection(
      app.notifications.enqueue(sender, [
        { userId: 'fine', payload: {} },
        { userId: 'refused', payload: {}, priority: BEYOND },
      ]),
    );
    expect(error).toMatchObject({ statusCode: 500, code: 'HERALD_ERR_INTERNAL' });
    expect(error.message).toMatch(/nothing was accepted/);
    expect(error.extra ?? {}).not.toHaveProperty('maybeAccepted');
    const logged = lines.find((line) => line.level === 'error');
    expect(logged?.object.err).toBeInstanceOf(JobRefusedError);
    expect(logged?.object.err?.message).toContain(`Priority should be between 0 and ${PRIORITY_LIMIT}`);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it('a topic send or broadcast: the same 500, logged, and no fan-out job', async () => {
    const { request: sender, lines } = request();
    const error = await rejection(
      app.fanouts.enqueue(sender, { payload: {}, priority: BEYOND }, { broadcast: true }),
    );
    expect(error).toMatchObject({ statusCode: 500, code: 'HERALD_ERR_INTERNAL' });
    expect(lines.find((line) => line.level === 'error')?.object.err?.message).toContain(
      `Priority should be between 0 and ${PRIORITY_LIMIT}`,
    );
    expect(await app.fanoutQueue.count()).toBe(0);
  });

  it('an add Redis does not confirm in time stays a 503 "maybeAccepted", its cause logged as a warning', async () => {
    const { request: sender, lines } = request(true);
    const error = await rejection(
      addDurably(app, sender, () => Promise.reject(new RedisTimeoutError(100)), [0]),
    );
    expect(error).toMatchObject({ statusCode: 503, code: 'HERALD_ERR_UNAVAILABLE' });
    expect(error.extra).toMatchObject({ maybeAccepted: true });
    expect(lines.find((line) => line.level === 'warn')?.object.err).toBeInstanceOf(RedisTimeoutError);
  });

  it('envelope options BullMQ would refuse stop the gateway at start, naming the reason', () => {
    expect(
      () =>
        new Envelopes(app.queue, app.queueConnection, {
          windowMs: 10,
          maxItems: 10,
          retry: { attempts: 3, backoffMs: 10, jitter: 2 },
        }),
    ).toThrow(new RegExp(`${NOTIFY_ENVELOPE_JOB_NAME} job envelope-.*Jitter should be between 0 and 1`));
  });
});
