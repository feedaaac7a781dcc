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
  // `offline`: said because the inbox was not live, so not said once it is, from the very render that
  // shows it live (an effect alone cleared it one render later: "Live" beside "not connected").
  const [problem, setProblem] = useState<{ text: string; offline: boolean } | undefined>(undefined);
  const live = connection === 'live';
  useEffect(() => {
    if (live) setProblem(undefined);
  }, [live]);
  const run = useCallback(
    <T>(what: string, change: () => Promise<T>, then?: (value: T) => void) => {
      if (!live) {
        setProblem({ text: `Could not ${what}: not connected. Try again once it is live.`, offline: true });
        return;
      }
      change().then(
        (value) => {
          setProblem(undefined);
          then?.(value);
        },
        (error: unknown) =>
          setProblem({
            text: `Could not ${what}: ${error instanceof Error ? error.message : String(error)}`,
            offline: false,
          }),
      );
    },
    [live],
  );
  return { run, problem: problem === undefined || (live && problem.offline) ? undefined : problem.text };
}
