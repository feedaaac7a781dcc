// Reference peers: the bare Fastify route plus the one Redis operation a Herald contender needs, done
// the cheapest way, with no auth, validation or limiter. They show what that Redis work alone costs on
// this machine, so the gap between Herald and bare Fastify can be read as "Redis round trip" vs
// "Herald's own work".
//   PEER=get     one GET per request on an ioredis client with auto-pipelining (the cheapest round trip)
//   PEER=bullmq  one BullMQ queue.add per request, with the gateway's job options (what "durably in
//                Redis" costs with BullMQ before any Herald code runs)
//   PEER=rate-limit-bullmq  the stack a user would wire by hand: @fastify/rate-limit with its Redis
//                store (one limit per API key, far above the load), then the same queue.add
import { randomUUID } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import { DEFAULT_QUEUE_PREFIX, NOTIFY_JOB_NAME, notificationJobOptions } from '@herald/protocol';
import { Queue } from 'bullmq';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const peer = process.env.PEER;
const app = Fastify({ logger: false });
if (peer === 'get') {
  const redis = new Redis(url, { enableAutoPipelining: true });
  const prefix = process.env.HERALD_RATE_LIMIT_PREFIX ?? 'bench-peer:';
  app.post('/notify', async (request, reply) => {
    await redis.get(`${prefix}${(request.body as { userId: string }).userId}`);
    return reply.code(202).send({ id: randomUUID(), status: 'queued' });
  });
} else if (peer === 'bullmq' || peer === 'rate-limit-bullmq') {
  if (peer === 'rate-limit-bullmq') {
    await app.register(rateLimit, {
      global: true,
      max: 1_000_000_000,
      timeWindow: 1000,
      redis: new Redis(url, { connectTimeout: 500, maxRetriesPerRequest: 1 }),
      nameSpace: `${process.env.HERALD_RATE_LIMIT_PREFIX ?? 'bench-peer:'}fastify-rate-limit:`,
      keyGenerator: (request) => String(request.headers.authorization ?? request.ip),
    });
  }
  const queue = new Queue(`${process.env.HERALD_QUEUE_NAME ?? 'bench'}-peer`, {
    prefix: DEFAULT_QUEUE_PREFIX,
    connection: { url },
  });
  app.post('/notify', async (request, reply) => {
    const body = request.body as { userId: string; payload: Record<string, unknown> };
    const job = {
      id: randomUUID(),
      userId: body.userId,
      payload: body.payload,
      createdAt: new Date().toISOString(),
      tenantId: 'bench',
    };
    await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    return reply.code(202).send({ id: job.id, status: 'queued' });
  });
} else {
  throw new Error(`PEER must be get, bullmq or rate-limit-bullmq, not ${String(peer)}`);
}
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(
  `${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`,
);
