import Type, { type Static } from 'typebox';

/** Largest `userId` accepted, in characters. */
export const USER_ID_MAX_LENGTH = 256;

/** A recipient id: what the sending backend calls its user. */
export const UserId = Type.String({
  minLength: 1,
  maxLength: USER_ID_MAX_LENGTH,
  description: 'The recipient, as the sending backend identifies its user.',
});

/** Body of `POST /notify`. */
export const NotifyRequest = Type.Object(
  {
    userId: UserId,
    payload: Type.Record(Type.String(), Type.Unknown(), {
      description: 'Any JSON object; delivered to the browser unchanged.',
    }),
  },
  { additionalProperties: false },
);
export type NotifyRequest = Static<typeof NotifyRequest>;

/** `202` answer of `POST /notify`. */
export const NotifyAccepted = Type.Object({
  id: Type.String({ description: 'Notification id; the same id arrives in the `notification` event.' }),
  status: Type.Literal('queued'),
});
export type NotifyAccepted = Static<typeof NotifyAccepted>;

/** Body of `POST /tokens`. */
export const TokenRequest = Type.Object({ userId: UserId }, { additionalProperties: false });
export type TokenRequest = Static<typeof TokenRequest>;

/** Answer of `POST /tokens`. */
export const TokenResponse = Type.Object({
  token: Type.String({ description: 'JWT (HS256) to pass as `auth.token` to the realtime server.' }),
  expiresAt: Type.String({ format: 'date-time' }),
});
export type TokenResponse = Static<typeof TokenResponse>;

/** Every HTTP error Herald answers has this shape. */
export const ErrorResponse = Type.Object({
  error: Type.String({ description: 'What went wrong and what to do about it.' }),
  code: Type.String({ description: 'Stable machine-readable code, `HERALD_ERR_*`.' }),
  details: Type.Optional(Type.Unknown()),
  retryAfterMs: Type.Optional(Type.Integer()),
});
export type ErrorResponse = Static<typeof ErrorResponse>;

