// Herald's limiter alone: the same Fastify route as the bare peer, plus @herald/rate-limiter's plugin
// with the gateway's two policies (sender + recipient, one atomic Redis call per request).
import { randomUUID } from 'node:crypto';
import { RateLimiter } from '@herald/rate-limiter';
import { heraldRateLimit } from '@herald/rate-limiter/fastify';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 1,
  lazyConnect: true,
});
await redis.connect();
const prefix = process.env.HERALD_RATE_LIMIT_PREFIX ?? 'bench-rl:';
const limiter = new RateLimiter({
  redis,
  policies: [
    { name: 'sender', capacity: 1e9, ratePerSecond: 1e9, keyPrefix: `${prefix}sender:` },
    { name: 'recipient', capacity: 10, ratePerSecond: 10, keyPrefix: prefix },
  ],
});
const app = Fastify({ logger: false });
await app.register(heraldRateLimit, { limiter });
app.post(
  '/notify',
  {
    config: {
      rateLimit: {
        key: (request) => ({ sender: 'bench-key', recipient: (request.body as { userId: string }).userId }),
      },
    },
  },
  async (_request, reply) => reply.code(202).send({ id: randomUUID(), status: 'queued' }),
);
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(
  `${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`,
);
