import type { AdminSnapshot } from '@herald/protocol';

/** Seconds of token levels the dashboard keeps and draws. */
export const HISTORY_SECONDS = 60;

/** The token levels of the hot users over time, as the snapshots reported them (one a second). */
export interface TokenHistory {
  /** Unix seconds of each sample, oldest first. */
  seconds: number[];
  /** Per hot user (`<tenant>/<user>`), its level at each second (null: not hot, or not read then). */
  levels: Map<string, (number | null)[]>;
  /** Per user, its bucket's burst (the chart's ceiling). */
  limits: Map<string, number>;
}

export function emptyHistory(): TokenHistory {
  return { seconds: [], levels: new Map(), limits: new Map() };
}

/** The label of a hot user: `user` in tenant `default`, `tenant/user` otherwise. */
export function userLabel(user: { tenantId: string; userId: string }): string {
  return user.tenantId === 'default' ? user.userId : `${user.tenantId}/${user.userId}`;
}

/**
 * `history` with `snapshot`'s hot users' levels appended at its second, the oldest beyond
 * {@link HISTORY_SECONDS} dropped, and users absent for the whole window forgotten. A snapshot of a
 * second already recorded replaces it (the first push after a reconnect). Returns a new history.
 */
export function addSnapshot(history: TokenHistory, snapshot: AdminSnapshot): TokenHistory {
  const second = Math.floor(Date.parse(snapshot.at) / 1000);
  const now = new Map<string, number | null>();
  const limits = new Map(history.limits);
  for (const user of snapshot.hotUsers) {
    const label = userLabel(user);
    now.set(label, user.tokens?.remaining ?? null);
    if (user.tokens) limits.set(label, user.tokens.limit);
  }
  const replace = history.seconds.at(-1) === second;
  const keep = Math.max(
    0,
    (replace ? history.seconds.length - 1 : history.seconds.length) - (HISTORY_SECONDS - 1),
  );
  const end = replace ? history.seconds.length - 1 : history.seconds.length;
  const seconds = [...history.seconds.slice(keep, end), second];
  const levels = new Map<string, (number | null)[]>();
  for (const label of new Set([...history.levels.keys(), ...now.keys()])) {
    const past = (history.levels.get(label) ?? new Array(history.seconds.length).fill(null)).slice(keep, end);
    const series = [...past, now.get(label) ?? null];
    if (series.some((level) => level !== null)) levels.set(label, series);
    else limits.delete(label);
  }
  return { seconds, levels, limits };
}
