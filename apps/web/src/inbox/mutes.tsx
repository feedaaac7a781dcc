import type {
  ConnectionState,
  HeraldClient,
  HeraldItem,
  HeraldPreferences,
  MuteTarget,
} from '@herald/client';
import { useState } from 'preact/hooks';
import type { Actions } from './actions.js';
import { useLoadWhileShown } from './hooks.js';

/** The user's mutes as the page knows them, and the calls that change them. */
export interface Mutes {
  /** Undefined until the server answered. */
  muted: HeraldPreferences['muted'] | undefined;
  mute(target: MuteTarget): void;
  unmute(target: MuteTarget): void;
}

/**
 * Loads the user's mutes each time the inbox goes live and each time the page is shown again (another
 * tab, or another device, may have changed them), and keeps what each mute / unmute answers.
 */
export function useMutes(client: HeraldClient, connection: ConnectionState, actions: Actions): Mutes {
  const [muted, setMuted] = useState<HeraldPreferences['muted'] | undefined>(undefined);
  const live = connection === 'live';
  useLoadWhileShown(
    live,
    () =>
      client.preferences().then(
        (preferences) => setMuted(preferences.muted),
        () => undefined,
      ),
    client,
  );
  const keep = (preferences: HeraldPreferences) => setMuted(preferences.muted);
  return {
    muted,
    mute: (target) => actions.run('mute', () => client.mute(target), keep),
    unmute: (target) => actions.run('unmute', () => client.unmute(target), keep),
  };
}

/** What a notification can be muted by: its topic, else its type; none without either. */
export function muteTargetOf(item: HeraldItem): MuteTarget | undefined {
  if (item.topic !== undefined) return { topic: item.topic };
  if (item.type !== undefined) return { type: item.type };
  return undefined;
}

/** The "Mute" action of one notification (its topic, else its type). */
export function MuteButton({ item, mutes, title }: { item: HeraldItem; mutes: Mutes; title: string }) {
  const target = muteTargetOf(item);
  if (target === undefined) return null;
  const [kind, name] = 'topic' in target ? ['topic', target.topic] : ['type', target.type];
  return (
    <button
      type="button"
      class="link-button"
      aria-label={`Mute ${kind} ${name}: ${title}`}
      onClick={() => mutes.mute(target)}
    >
      Mute
    </button>
  );
}

/** The muted topics and types, each with "Unmute"; nothing while there are none. */
export function MutedList({ mutes }: { mutes: Mutes }) {
  const { muted } = mutes;
  if (!muted || muted.topics.length + muted.types.length === 0) return null;
  const targets: MuteTarget[] = [
    ...muted.topics.map((topic) => ({ topic })),
    ...muted.types.map((type) => ({ type })),
  ];
  return (
    <ul class="muted-list" aria-label="Muted">
      {targets.map((target) => {
        const [kind, name] = 'topic' in target ? ['topic', target.topic] : ['type', target.type];
        return (
          <li key={`${kind}:${name}`}>
            <span>
              {name} <span class="muted-kind">({kind})</span>
            </span>
            <button
              type="button"
              class="link-button"
              aria-label={`Unmute ${kind} ${name}`}
              onClick={() => mutes.unmute(target)}
            >
              Unmute
            </button>
          </li>
        );
      })}
    </ul>
  );
}
