import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';

/** What the revocation check needs of a socket: the API key that minted its token. */
interface KeyedSocket {
  data: { keyId?: string };
}

/**
 * Revoked API keys: every `intervalMs`, the distinct keys behind this instance's sockets are checked
 * in one SMISMEMBER of `revokedKeys`; each socket of a revoked key is handed to `revoked` (which says
 * goodbye and disconnects it). A revoked key's live sockets are therefore gone within `intervalMs`
 * (+ one Redis round trip). Answers the timer (clear it on close); it does not keep the process alive.
 */
export function checkRevocations<S extends KeyedSocket>(options: {
  sockets: () => Iterable<S>;
  redis: Redis | Cluster;
  revokedKeys: string;
  intervalMs: number;
  revoked: (socket: S) => void;
  log: Logger;
}): NodeJS.Timeout {
  const timer = setInterval(() => {
    const byKey = new Map<string, S[]>();
    for (const socket of options.sockets()) {
      const keyId = socket.data.keyId;
      if (keyId === undefined) continue;
      const sockets = byKey.get(keyId);
      if (sockets) sockets.push(socket);
      else byKey.set(keyId, [socket]);
    }
    if (byKey.size === 0) return;
    const keyIds = [...byKey.keys()];
    options.redis.smismember(options.revokedKeys, ...keyIds).then(
      (flags) => {
        flags.forEach((flag, index) => {
          if (flag !== 1) return;
          for (const socket of byKey.get(keyIds[index] as string) ?? []) options.revoked(socket);
        });
      },
      (error: unknown) => options.log.warn({ err: error }, 'revocation check failed; retrying'),
    );
  }, options.intervalMs);
  timer.unref();
  return timer;
}
