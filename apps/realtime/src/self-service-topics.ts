import type { Topics } from '@herald/inbox';
import { type ClientToServerEvents, ErrorCode, SocketEvent, type TopicsReply } from '@herald/protocol';
import type { Logger } from 'pino';
import type { Socket } from 'socket.io';
import { answerCommand, CommandError } from './command-args.js';

/** `value` as JSON, at most 80 characters; one nested too deep to write (a RangeError) is said so. */
function shown(value: unknown): string {
  try {
    return String(JSON.stringify(value)).slice(0, 80);
  } catch {
    return 'a value nested too deep to show';
  }
}

/**
 * The `topics`, `subscribe` and `unsubscribe` events of one socket: its own user subscribes to and
 * unsubscribes from the topics its token allows (`allowed`, the token's `topics`, set by the backend in
 * `POST /tokens`), and no other. Each answers every allowed topic with whether the user is subscribed.
 */
export function listenToTopics(
  socket: Socket<ClientToServerEvents>,
  topics: Topics,
  userId: string,
  allowed: readonly string[],
  log: Logger,
): void {
  const list = async (): Promise<TopicsReply> => {
    const subscribed = await topics.subscribed(userId, allowed);
    return { ok: true, topics: allowed.map((topic, i) => ({ topic, subscribed: subscribed[i] === true })) };
  };
  const change =
    (subscribe: boolean) =>
    async (body: unknown): Promise<TopicsReply> => {
      const action = subscribe ? 'subscribe' : 'unsubscribe';
      const allows = `the token allows ${allowed.length === 0 ? 'none' : allowed.join(', ')}`;
      const topic = isObject(body) ? body.topic : undefined;
      if (topic === undefined) {
        // `emit('subscribe', 'news')` or `{ name: 'news' }`: told what was sent, not that "undefined" is not allowed.
        const sent = body === undefined ? 'nothing' : shown(body);
        throw new CommandError(
          ErrorCode.TOPIC_NOT_ALLOWED,
          `${action} takes { topic }, not ${sent} (${allows}).`,
        );
      }
      if (typeof topic !== 'string' || !allowed.includes(topic)) {
        throw new CommandError(
          ErrorCode.TOPIC_NOT_ALLOWED,
          `This token does not let the user ${subscribe ? 'subscribe to' : 'unsubscribe from'} ${shown(topic)} (${allows}): the backend sets them in POST /tokens \`topics\`.`,
        );
      }
      await (subscribe ? topics.subscribe(topic, [userId]) : topics.unsubscribe(topic, [userId]));
      return list();
    };
  socket.on(SocketEvent.TOPICS, (...args: unknown[]) => answerCommand(args, list, log));
  socket.on(SocketEvent.SUBSCRIBE, (...args: unknown[]) => answerCommand(args, change(true), log));
  socket.on(SocketEvent.UNSUBSCRIBE, (...args: unknown[]) => answerCommand(args, change(false), log));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
