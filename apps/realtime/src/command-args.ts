import type { CommandReply } from '@herald/protocol';

type Reply = (answer: CommandReply) => void;

/**
 * The body and acknowledgement of a client command. A client that sends no body
 * (`socket.emit('read-all', ack)`) puts its callback in the body's place: it is the acknowledgement.
 */
export function commandArgs(args: readonly unknown[]): [body: unknown, reply: Reply | undefined] {
  const [first, second] = args;
  if (typeof first === 'function') return [undefined, first as Reply];
  return [first, typeof second === 'function' ? (second as Reply) : undefined];
}
