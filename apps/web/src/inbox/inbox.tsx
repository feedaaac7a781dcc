import type { HeraldClient } from '@herald/client';
import { useMemo, useRef, useState } from 'preact/hooks';
import { useActions } from './actions.js';
import { ConnectionStatus } from './connection.js';
import { Feed } from './feed.js';
import { problemText, relativeFormat } from './format.js';
import { useHeraldState, useNow } from './hooks.js';
import { MutedList, useMutes } from './mutes.js';
import { Toasts } from './toasts.js';
import { TopicChoices } from './topics.js';

export interface InboxProps {
  client: HeraldClient;
  /** Open at first (the page) or closed behind the bell (an embed). */
  open?: boolean;
  /** In the page's flow (the page) rather than a popover under the bell (an embed). */
  inline?: boolean;
  /** The language of relative times (default the browser's). */
  locale?: string;
}

/**
 * One user's live inbox: a bell whose badge is the server's exact unread count, the connection as it
 * is, the topics the token lets the user subscribe to, the feed with mark read / mark all read and
 * mute, the muted topics and types (with unmute), and toasts. Everything comes from the client's
 * state; nothing is counted here.
 */
export function Inbox({ client, open: openAtFirst = false, inline = false, locale }: InboxProps) {
  const state = useHeraldState(client);
  const now = useNow(30_000);
  const format = useMemo(() => relativeFormat(locale), [locale]);
  const [open, setOpen] = useState(openAtFirst);
  const bell = useRef<HTMLButtonElement>(null);
  const count = state.unread?.count;
  const busy = state.connection === 'connecting' && state.items.length === 0;
  const actions = useActions(state.connection);
  const mutes = useMutes(client, state.connection, actions);

  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key !== 'Escape' || inline || !open) return;
    setOpen(false);
    bell.current?.focus();
  };

  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: Escape anywhere in the open popover closes it; the controls inside are the interactive elements
    <div class={inline ? 'inbox inline' : 'inbox'} onKeyDown={onKeyDown}>
      <div class="bar">
        <button
          ref={bell}
          type="button"
          class="bell"
          aria-expanded={open ? 'true' : 'false'}
          aria-controls="herald-panel"
          aria-label={count === undefined ? 'Notifications' : `Notifications, ${count} unread`}
          onClick={() => setOpen(!open)}
          part="bell"
        >
          <svg viewBox="0 0 24 24" width="22" height="22" aria-hidden="true" focusable="false">
            <path
              fill="currentColor"
              d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z"
            />
          </svg>
          <span class="badge" data-count={count ?? ''} hidden={!count} aria-hidden="true" part="badge">
            {count}
          </span>
        </button>
        <ConnectionStatus client={client} connection={state.connection} />
      </div>
      <section id="herald-panel" class="panel" hidden={!open} aria-labelledby="herald-heading" part="panel">
        <header class="panel-head">
          <h2 id="herald-heading">Notifications</h2>
          <button
            type="button"
            class="link-button"
            // aria-disabled, not disabled: the button keeps the focus once everything is read.
            aria-disabled={count ? undefined : 'true'}
            onClick={() => {
              if (count) actions.run('mark all read', () => client.markAllRead());
            }}
          >
            Mark all read
          </button>
        </header>
        {state.connection === 'unauthorized' ? (
          <p class="problem">
            Signed out{state.error ? `: ${problemText(state.error)}` : ''}{' '}
            <button type="button" class="link-button" onClick={() => client.reconnect()}>
              Retry
            </button>
          </p>
        ) : (state.connection === 'connecting' || state.connection === 'reconnecting') && state.error ? (
          // Why it is not live yet (a token route failing, the server out of reach): it keeps trying.
          <p class="problem" role="status">
            Not connected: {problemText(state.error)} (trying again)
          </p>
        ) : null}
        {actions.problem ? (
          <p class="problem" role="alert">
            {actions.problem}
          </p>
        ) : null}
        <TopicChoices client={client} connection={state.connection} actions={actions} />
        <MutedList mutes={mutes} />
        <Feed
          client={client}
          items={state.items}
          busy={busy}
          now={now}
          format={format}
          mutes={mutes}
          actions={actions}
          unreadCount={count}
        />
      </section>
      <Toasts client={client} />
    </div>
  );
}
