import type { HeraldItem } from '@herald/client';

/** What a notification shows: its payload's `title` and `body` when they are strings, else its JSON. */
export function describe(item: HeraldItem): { title: string; body: string } {
  const { title, body } = item.payload as { title?: unknown; body?: unknown };
  if (typeof title === 'string' || typeof body === 'string') {
    return {
      title: typeof title === 'string' ? title : (item.type ?? 'Notification'),
      body: typeof body === 'string' ? body : '',
    };
  }
  const json = JSON.stringify(item.payload);
  return {
    title: item.type ?? item.topic ?? 'Notification',
    body: json.length > 200 ? `${json.slice(0, 199)}…` : json,
  };
}

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['year', 365 * 24 * 3600],
  ['month', 30 * 24 * 3600],
  ['week', 7 * 24 * 3600],
  ['day', 24 * 3600],
  ['hour', 3600],
  ['minute', 60],
];

/**
 * The relative-time format of `locale` (the element's `lang`), or of the browser's language when
 * `locale` is no language tag (`en_US`): `Intl` throws on one, and the element rendered nothing.
 */
export function relativeFormat(locale: string | undefined): Intl.RelativeTimeFormat {
  try {
    return new Intl.RelativeTimeFormat(locale || undefined, { numeric: 'auto' });
  } catch {
    return new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  }
}

/**
 * "now", "5 minutes ago", "yesterday": `Intl.RelativeTimeFormat` in the page's language (no date library,
 * no locale data shipped). Under 45 s is "now", as a clock that ticks every 30 s can say honestly.
 */
export function relativeTime(iso: string, now: number, format: Intl.RelativeTimeFormat): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  if (!Number.isFinite(seconds)) return '';
  const abs = Math.abs(seconds);
  if (abs < 45) return format.format(0, 'second');
  for (const [unit, size] of UNITS) {
    if (abs >= size * 0.9) return format.format(Math.round(seconds / size), unit);
  }
  return format.format(Math.round(seconds / 60), 'minute');
}

/**
 * What the inbox says of a connection problem: the server's messages for these codes are written for
 * developers ("Token expired: get a new one from POST /tokens, then reconnect with your lastOffset."),
 * so the reader gets plain words; any other problem is said as the client put it (a token route that
 * answered 500, a server out of reach), which is what whoever runs the page needs.
 */
export function problemText(error: { code: string; message: string }): string {
  return PLAIN[error.code] ?? error.message;
}

const PLAIN: Record<string, string> = {
  HERALD_ERR_TOKEN_EXPIRED: 'your session expired; renewing it',
  HERALD_ERR_TOKEN_REVOKED: 'access to notifications was withdrawn',
  HERALD_ERR_TOKEN_INVALID: 'this session is not valid for notifications',
  HERALD_SERVER_SHUTDOWN: 'the notification server is restarting',
  HERALD_ERR_TOO_MANY_CONNECTIONS: 'too many tabs or devices are open for this account',
};
