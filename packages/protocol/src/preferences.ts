/**
 * A user's preferences: the topics and notification types they muted. The HTTP bodies of
 * `/users/:userId/preferences` and the Socket.IO events `preferences`, `mute` and `unmute`.
 */
import Type, { type Static } from 'typebox';
import { TOPIC_MAX_LENGTH, TOPIC_PATTERN } from './schemas.js';

/** Most mutes (topics and types together) one user may hold: the append script reads them per notification. */
export const MUTES_MAX = 1000;

const MuteName = (what: string) =>
  Type.String({
    minLength: 1,
    maxLength: TOPIC_MAX_LENGTH,
    pattern: TOPIC_PATTERN,
    description: `A ${what}: 1–64 of A–Z a–z 0–9 _ . : / - (as the notification's \`${what}\` field)`,
  });
const Names = (what: string) => Type.Array(MuteName(what), { minItems: 1, maxItems: MUTES_MAX });

/** Body of `PUT` and `DELETE /users/:userId/preferences/mutes`, and of the `mute` / `unmute` events. */
export const MuteRequest = Type.Object(
  { topics: Type.Optional(Names('topic')), types: Type.Optional(Names('type')) },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'At least one of `topics`, `types`; each 1 to 1,000 names.',
    examples: [{ topics: ['marketing'], types: ['digest'] }],
  },
);
export type MuteRequest = Static<typeof MuteRequest>;

/** What a user muted, each list in byte order. */
export const MutedLists = Type.Object({
  topics: Type.Array(Type.String()),
  types: Type.Array(Type.String()),
});
export type MutedLists = Static<typeof MutedLists>;

/** Answer of `GET /users/:userId/preferences`, and of a mute or unmute (with `changed`). */
export const PreferencesResponse = Type.Object({
  userId: Type.String(),
  muted: MutedLists,
  changed: Type.Optional(
    Type.Integer({ description: 'Mutes added (PUT) or removed (DELETE) by this call.' }),
  ),
});
export type PreferencesResponse = Static<typeof PreferencesResponse>;
