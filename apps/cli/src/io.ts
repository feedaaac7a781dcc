import { withoutPassword } from '@herald/config';
import { Redis } from 'ioredis';

/** Where a CLI command writes. */
export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

/**
 * Connects to Redis for a CLI command, or says why it cannot (and returns undefined: exit code 1).
 * The caller disconnects.
 */
export async function connectForCli(redisUrl: string, io: CliIo): Promise<Redis | undefined> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, connectTimeout: 3000, lazyConnect: true });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return redis;
  } catch (error) {
    io.err(`Cannot reach Redis at ${withoutPassword(redisUrl)}: ${(error as Error).message}. Set REDIS_URL.`);
    redis.disconnect();
    return undefined;
  }
}
