/**
 * What an app says when it cannot listen: Node's `listen`/`getaddrinfo` error (`getaddrinfo ENOTFOUND
 * bogus.invalid`, `listen EADDRINUSE: address already in use 0.0.0.0:3000`) in words that name the
 * setting to change, `HOST` or `PORT`. Node's error is kept as the cause; an error of another kind is
 * answered as it is.
 *
 * @example
 * ```ts
 * await app.listen({ port, host }).catch((error: unknown) => { throw listenFailure(error, { port, host }); });
 * ```
 */
export function listenFailure(error: unknown, at: { port: number; host: string }): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const { port, host } = at;
  const where = `${host}:${port}`;
  const message = {
    ENOTFOUND: `HOST=${host} is no name this machine can resolve: set HOST to one of its addresses (0.0.0.0 for all of them, 127.0.0.1 for this machine only)`,
    EAI_AGAIN: `HOST=${host} could not be resolved (the DNS did not answer): set HOST to an address (0.0.0.0 for all of this machine's)`,
    EADDRNOTAVAIL: `HOST=${host} is not an address of this machine: set HOST to one of its addresses (0.0.0.0 for all of them)`,
    EADDRINUSE: `PORT=${port} is taken on ${host} (another process listens at ${where}): set PORT to a free port, or stop that process`,
    EACCES: `PORT=${port} on ${host} needs privileges this process does not have (ports below 1024): set PORT to 1024 or above`,
  }[code ?? ''];
  return message === undefined ? error : new Error(message, { cause: error });
}
