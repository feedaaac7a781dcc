import type { InboxOffset, UnreadEvent } from '@herald/protocol';
import type { Core, HeraldSocket } from './core.js';
import { HeraldError, replyValue } from './errors.js';
import { readMarks } from './inbox-sync.js';

/** A command (`list`, `read`, `read-all`, `preferences`, `mute`, `unmute`, `topics`, `subscribe`, `unsubscribe`): through this tab's socket (leader, solo) or the leader's (follower). */
export async function run(c: Core, op: string, args: unknown): Promise<unknown> {
  if (c._closed) throw new HeraldError('HERALD_ERR_CLOSED', 'The client was closed.');
  if (c._role === 'follower') return c._requests.send(op, args);
  const value = await ask(c, await liveSocket(c), op, args);
  if (op === 'read' || op === 'read-all') {
    const result = value as { changed: number; unread?: UnreadEvent };
    const body = args as { ids?: string[]; upTo?: InboxOffset };
    if (op === 'read-all') c._store.markAllRead(body.upTo);
    readMarks(c, body.ids, result.unread);
    c._tabs?.post({ t: op, ids: body.ids, upTo: body.upTo, unread: result.unread });
  }
  return value;
}

/**
 * `op` on `socket`, its reply's value: a HeraldError when it is a refusal or of no reply's shape, or
 * when no answer comes within the client's `timeoutMs` (`HERALD_ERR_TIMEOUT`, Socket.IO's error its cause).
 */
export async function ask(
  c: Core,
  socket: HeraldSocket,
  op: string,
  args: unknown,
): Promise<Record<string, unknown>> {
  const reply: unknown = await socket
    .timeout(c._timeoutMs)
    .emitWithAck(op as 'read', args as { ids: string[] })
    .catch((error: unknown) => {
      throw new HeraldError('HERALD_ERR_TIMEOUT', `Herald did not answer ${op} in time: retry.`, {
        cause: error,
      });
    });
  return replyValue(op, reply);
}

/** The socket once it is live (commands wait through a reconnect rather than fail at once). */
async function liveSocket(c: Core): Promise<HeraldSocket> {
  const deadline = Date.now() + c._timeoutMs;
  for (;;) {
    const socket = c._socket;
    if (socket?.connected) return socket;
    if (c._closed || c._connection === 'unauthorized')
      throw new HeraldError('HERALD_ERR_NOT_CONNECTED', `Not connected (${c._connection}).`);
    if (Date.now() > deadline)
      throw new HeraldError('HERALD_ERR_TIMEOUT', 'Not connected to Herald in time: retry.');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
