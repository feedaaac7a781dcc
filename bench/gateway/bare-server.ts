// The peer: a bare Fastify 5 route that parses the same JSON body and answers 202. No auth, no limiter, no Redis.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.post('/notify', async (_request, reply) => reply.code(202).send({ id: randomUUID(), status: 'queued' }));
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(
  `${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`,
);
