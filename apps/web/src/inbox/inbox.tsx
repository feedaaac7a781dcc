import type { HeraldClient } from '@herald/client';

/** The live inbox of one user, driven by a Herald client (skeleton: filled in by the inbox commits). */
export function Inbox({ client }: { client: HeraldClient }) {
  return <section aria-label="Notifications">{client.getState().connection}</section>;
}
