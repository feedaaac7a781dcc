import type { Cluster, Redis } from 'ioredis';

/**
 * The Redis an app reached is not the kind its settings name: a node of a Redis Cluster given as
 * `REDIS_URL` alone, or a server without cluster mode given in `HERALD_REDIS_CLUSTER_NODES`. Every
 * command of that connection is refused with it (its message names the setting to change), so that
 * readiness and every failing request say so, rather than "unavailable".
 */
export class RedisTopologyError extends Error {
  readonly code = 'HERALD_ERR_REDIS_TOPOLOGY';
  constructor(message: string) {
    super(message);
    this.name = 'RedisTopologyError';
  }
}

/** An ioredis command, as `sendCommand` takes it: enough to refuse it. */
interface QueuedCommand {
  name: string;
  reject(error: Error): void;
  promise: Promise<unknown>;
}

/**
 * Refuses every command of `client` but `INFO` (the check's own) with {@link RedisTopologyError} while
 * `problem()` answers one, as ioredis itself refuses commands in monitor mode; otherwise sends them as usual.
 */
function refuseWhile(client: Redis | Cluster, problem: () => RedisTopologyError | undefined): void {
  const send = client.sendCommand.bind(client) as (...args: unknown[]) => unknown;
  (
    client as unknown as { sendCommand: (command: QueuedCommand, ...rest: unknown[]) => unknown }
  ).sendCommand = (command, ...rest) => {
    const error = command.name === 'info' ? undefined : problem();
    if (error === undefined) return send(command, ...rest);
    command.reject(error);
    return command.promise;
  };
}

/**
 * Checks, on each connection of a one-server client (`REDIS_URL` alone), that the server is not a Redis
 * Cluster node (`INFO cluster`: `cluster_enabled:1`). One node of a Cluster answers only the keys of its
 * own slots (MOVED for the others, CROSSSLOT for a script whose keys are of several): the gateway
 * answered `/readyz` 200 and then refused every send as "Rate limiter unavailable". Such a client
 * refuses every command with a {@link RedisTopologyError} naming `HERALD_REDIS_CLUSTER_NODES`, and
 * emits it once as an `error` (the apps log it). The check goes before the first command of each
 * connection, which waits for it (so does every command until it answers, but a pipeline's, which
 * ioredis writes at once: those of that first round trip still go).
 */
export function refuseClusterNode(redis: Redis): void {
  let problem: RedisTopologyError | undefined;
  // This connection's check: settled (true) once INFO answered or failed.
  let check: { settled: boolean; done: Promise<void> } | undefined;
  redis.on('close', () => {
    check = undefined;
  });
  const start = () => {
    const started = {
      settled: false,
      done: redis.info('cluster').then(
        (info) => {
          const before = problem;
          problem = /^cluster_enabled:1\s*$/m.test(info)
            ? new RedisTopologyError(
                `REDIS_URL (${redis.options.host}:${redis.options.port}) is a node of a Redis Cluster (cluster_enabled:1), which holds only its own slots' keys: set HERALD_REDIS_CLUSTER_NODES to the Cluster's nodes (host:port,…) and HERALD_PUBSUB_MODE=sharded (REDIS_URL still gives their password and TLS)`,
              )
            : undefined;
          if (problem !== undefined && before === undefined && redis.listenerCount('error') > 0)
            redis.emit('error', problem);
        },
        () => {}, // not answered (a subscriber connection, a drop): the next connection asks again
      ),
    };
    started.done.finally(() => {
      started.settled = true;
    });
    return started;
  };
  const send = redis.sendCommand.bind(redis) as (...args: unknown[]) => unknown;
  (redis as unknown as { sendCommand: (command: QueuedCommand, ...rest: unknown[]) => unknown }).sendCommand =
    (command, ...rest) => {
      // Before `ready` ioredis queues the command and sends it here again then.
      if (command.name === 'info' || redis.status !== 'ready') return send(command, ...rest);
      check ??= start();
      if (check.settled || rest.length > 0) {
        if (problem === undefined) return send(command, ...rest);
        command.reject(problem);
        return command.promise;
      }
      check.done.then(() => {
        if (problem === undefined) send(command);
        else command.reject(problem);
      });
      return command.promise;
    };
}

/**
 * Refuses every command of a Cluster client whose start-up nodes answer that they are not in cluster
 * mode (`ERR This instance has cluster support disabled` on `CLUSTER SLOTS`), with a
 * {@link RedisTopologyError} naming `HERALD_REDIS_CLUSTER_NODES`, until the client is ready. Without it
 * the apps said only "Redis or the queue is unavailable" (their logs, "Failed to refresh slots cache").
 */
export function refuseNonClusterNodes(cluster: Cluster): void {
  let problem: RedisTopologyError | undefined;
  refuseWhile(cluster, () => problem);
  cluster.on('error', (error: Error & { lastNodeError?: Error }) => {
    const cause = error.lastNodeError?.message ?? '';
    if (problem !== undefined || !/cluster support disabled/i.test(cause)) return;
    problem = new RedisTopologyError(
      `HERALD_REDIS_CLUSTER_NODES names Redis servers without cluster mode (${cause}): unset it to use REDIS_URL's Redis as one server, or name the nodes of a Redis Cluster`,
    );
    cluster.emit('error', problem);
  });
  cluster.on('ready', () => {
    problem = undefined;
  });
}
