import type { ConnectionState } from '@herald/client';
import { useCallback, useEffect, useState } from 'preact/hooks';

/** What the user's actions (mark read, mute, subscribe) go through: a failure is said, never dropped. */
export interface Actions {
  /**
   * Runs `change` when live; when not, or when it fails, says what could not be done (`what`: "mark
   * read"). Before, an action pressed while offline was dropped without a word.
   */
  run<T>(what: string, change: () => Promise<T>, then?: (value: T) => void): void;
  /** What the last action that could not be done says; undefined once one succeeds or the inbox is live again. */
  problem: string | undefined;
}

export function useActions(connection: ConnectionState): Actions {
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const live = connection === 'live';
  useEffect(() => {
    if (live) setProblem(undefined);
  }, [live]);
  const run = useCallback(
    <T>(what: string, change: () => Promise<T>, then?: (value: T) => void) => {
      if (!live) {
        setProblem(`Could not ${what}: not connected. Try again once it is live.`);
        return;
      }
      change().then(
        (value) => {
          setProblem(undefined);
          then?.(value);
        },
        (error: unknown) =>
          setProblem(`Could not ${what}: ${error instanceof Error ? error.message : String(error)}`),
      );
    },
    [live],
  );
  return { run, problem };
}
