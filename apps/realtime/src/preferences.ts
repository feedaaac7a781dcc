import { InboxError, type Preferences } from '@herald/inbox';
import {
  type ClientToServerEvents,
  ErrorCode,
  type MuteRequest,
  type PreferencesReply,
  SocketEvent,
} from '@herald/protocol';
import type { Logger } from 'pino';
import type { Socket } from 'socket.io';
import { commandArgs } from './command-args.js';

type Reply = (answer: PreferencesReply) => void;

/**
 * The `preferences`, `mute` and `unmute` events of one socket: its own user's mutes (the token's tenant
 * and user, never a user the client names), answered `{ ok, preferences, changed? }` or
 * `{ ok: false, code, error }`.
 */
export function listenToPreferences(
  socket: Socket<ClientToServerEvents>,
  preferences: Preferences,
  userId: string,
  log: Logger,
): void {
  const answer = (args: unknown[], run: (body: MuteRequest) => Promise<PreferencesReply>) => {
    const [body, reply] = commandArgs(args) as [unknown, Reply | undefined];
    run(body as MuteRequest).then(
      (result) => reply?.(result),
      (error: unknown) => {
        if (error instanceof InboxError) {
          reply?.({ ok: false, code: error.code, error: error.message });
          return;
        }
        log.warn({ err: error }, 'preferences command failed');
        reply?.({ ok: false, code: ErrorCode.UNAVAILABLE, error: 'Redis unavailable: retry shortly.' });
      },
    );
  };
  socket.on(SocketEvent.PREFERENCES, (...args: unknown[]) =>
    answer(args, async () => ({ ok: true, preferences: { muted: await preferences.get(userId) } })),
  );
  socket.on(SocketEvent.MUTE, (...args: unknown[]) =>
    answer(args, async (body) => {
      const { changed, muted } = await preferences.mute(userId, body);
      return { ok: true, preferences: { muted }, changed };
    }),
  );
  socket.on(SocketEvent.UNMUTE, (...args: unknown[]) =>
    answer(args, async (body) => {
      const { changed, muted } = await preferences.unmute(userId, body);
      return { ok: true, preferences: { muted }, changed };
    }),
  );
}
