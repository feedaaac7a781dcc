import { waitFor } from '@herald/testing';
import {
  createHeraldClient,
  type HeraldClient,
  type HeraldClientOptions,
  type ResumeInfo,
} from '../../src/index.js';

/** A client and everything it reported: every `notification`, `toast`, `resume` and state. */
export interface Recorded {
  client: HeraldClient;
  notifications: string[];
  toasts: string[];
  resumes: ResumeInfo[];
  connections: string[];
  tokens: number;
}

export function record(options: HeraldClientOptions): Recorded {
  const recorded: Recorded = {
    client: undefined as unknown as HeraldClient,
    notifications: [],
    toasts: [],
    resumes: [],
    connections: [],
    tokens: 0,
  };
  const getToken = options.getToken;
  recorded.client = createHeraldClient({
    ...options,
    getToken: () => {
      recorded.tokens++;
      return getToken();
    },
  });
  recorded.client.on('notification', (item) => recorded.notifications.push(item.id));
  recorded.client.on('toast', (item) => recorded.toasts.push(item.id));
  recorded.client.on('resume', (info) => recorded.resumes.push(info));
  recorded.client.on('connection', (state) => recorded.connections.push(state));
  return recorded;
}

export function live(recorded: Recorded, what = 'live'): Promise<unknown> {
  return waitFor(() => recorded.client.getState().connection === 'live', { timeoutMs: 30_000, what });
}

/** The item ids the client holds, in offset order. */
export function itemIds(recorded: Recorded): string[] {
  return recorded.client.getState().items.map((item) => item.id);
}

/** Fails unless `ids` holds no id twice. */
export function once(ids: readonly string[]): boolean {
  return new Set(ids).size === ids.length;
}
