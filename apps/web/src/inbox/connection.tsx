import type { ConnectionState, HeraldClient } from '@herald/client';
import { useEffect, useState } from 'preact/hooks';

/** What the indicator says: the client's connection, with "catching up" while a replay arrives. */
export type Indicator = 'connecting' | 'live' | 'reconnecting' | 'catching-up' | 'offline' | 'unauthorized';

const LABELS: Record<Indicator, string> = {
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  'catching-up': 'Catching up',
  offline: 'Offline',
  unauthorized: 'Signed out',
};

/**
 * The honest indicator: `live` only once the server said the replay is done (`synced`), `catching up`
 * while missed notifications arrive before that, `reconnecting` / `offline` / `signed out` as the client
 * says; after a resume that replayed something, "caught up N" for a few seconds.
 */
export function ConnectionStatus({
  client,
  connection,
}: {
  client: HeraldClient;
  connection: ConnectionState;
}) {
  const [replaying, setReplaying] = useState(0);
  const [caughtUp, setCaughtUp] = useState(0);
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const offNotification = client.on('notification', (_item, { replayed }) => {
      if (replayed) setReplaying((count) => count + 1);
    });
    const offResume = client.on('resume', ({ replayed, wasRecovering }) => {
      setReplaying(0);
      if (!wasRecovering || replayed === 0) return;
      setCaughtUp(replayed);
      clearTimeout(timer);
      timer = setTimeout(() => setCaughtUp(0), 5000);
    });
    return () => {
      offNotification();
      offResume();
      clearTimeout(timer);
    };
  }, [client]);
  const indicator: Indicator =
    // Missed notifications arriving: the socket is back, whatever the last state said (offline too).
    connection !== 'live' && connection !== 'unauthorized' && replaying > 0
      ? 'catching-up'
      : (connection satisfies Indicator);
  const detail =
    indicator === 'catching-up'
      ? ` (${replaying})`
      : indicator === 'live' && caughtUp > 0
        ? ` · caught up ${caughtUp}`
        : '';
  return (
    <span class="connection" data-state={indicator} part="connection">
      <span class="dot" aria-hidden="true" />
      <span class="connection-label">
        {LABELS[indicator]}
        {detail}
      </span>
    </span>
  );
}
