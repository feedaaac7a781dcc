import { isolatedEnv, queueConnection } from '@herald/testing';
import { Queue } from 'bullmq';

// 32+ bytes each, as the gateway requires outside development mode.
export const API_KEY = 'cli-test-key-1-0123456789abcdef0123456789';
export const JWT_SECRET = 'cli-test-secret-0123456789abcdef0123456789';
export const auth = { authorization: `Bearer ${API_KEY}` };

/** Environment of a gateway (and of the CLI) on the test Redis with its own queue and prefixes. */
export function testEnv(env: Record<string, string> = {}): Record<string, string> {
  return { ...isolatedEnv(), HERALD_API_KEYS: API_KEY, HERALD_JWT_SECRET: JWT_SECRET, ...env };
}

/** Drops the test's queue `name` (partition 0, `{herald}`) with every job in it. */
export async function dropQueue(name: string): Promise<void> {
  const queue = new Queue(name, { prefix: '{herald}', connection: queueConnection() });
  await queue.obliterate({ force: true });
  await queue.close();
}
