import type { HeraldClient, HeraldState } from '@herald/client';
import { useEffect, useState } from 'preact/hooks';

/** The client's state, re-rendered on every change (the client is an external store). */
export function useHeraldState(client: HeraldClient): HeraldState {
  const [state, setState] = useState(() => client.getState());
  useEffect(() => {
    setState(client.getState());
    return client.subscribe(setState);
  }, [client]);
  return state;
}

/** `Date.now()`, refreshed every `everyMs` (relative times stay true without a re-render per item). */
export function useNow(everyMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

/**
 * Runs `load` each time `live` becomes true and each time the page is shown again while live (another
 * tab or device may have changed what it reads); `load` should not change between renders but with `key`.
 */
export function useLoadWhileShown(live: boolean, load: () => void, key: unknown): void {
  // biome-ignore lint/correctness/useExhaustiveDependencies: `load` is fixed by `key` (the client)
  useEffect(() => {
    if (!live) return;
    const shown = () => {
      if (document.visibilityState === 'visible') load();
    };
    shown();
    document.addEventListener('visibilitychange', shown);
    return () => document.removeEventListener('visibilitychange', shown);
  }, [live, key]);
}
