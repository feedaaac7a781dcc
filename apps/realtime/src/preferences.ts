import type { Preferences } from '@herald/inbox';
import {
  type ClientToServerEvents,
  type MuteRequest,
  type PreferencesReply,
  SocketEvent,
} from '@herald/protocol';
import type { Logger } from 'pino';
import type { Socket } from 'socket.io';
import { answerCommand } from './command-args.js';

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
  const change =
    (mute: boolean) =>
    async (body: unknown): Promise<PreferencesReply> => {
      const request = body as MuteRequest;
      const { changed, muted } = await (mute
        ? preferences.mute(userId, request)
        : preferences.unmute(userId, request));
      return { ok: true, preferences: { muted }, changed };
    };
  socket.on(SocketEvent.PREFERENCES, (...args: unknown[]) =>
    answerCommand(
      args,
      async (): Promise<PreferencesReply> => ({
        ok: true,
        preferences: { muted: await preferences.get(userId) },
      }),
      log,
    ),
  );
  socket.on(SocketEvent.MUTE, (...args: unknown[]) => answerCommand(args, change(true), log));
  socket.on(SocketEvent.UNMUTE, (...args: unknown[]) => answerCommand(args, change(false), log));
}
