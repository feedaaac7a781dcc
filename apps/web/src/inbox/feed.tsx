import { compareOffsets, type HeraldClient, type HeraldItem } from '@herald/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Actions } from './actions.js';
import { describe, relativeTime } from './format.js';
import { MuteButton, type Mutes } from './mutes.js';

/** Keys that move between articles (the ARIA feed pattern's Page Down / Page Up, and the arrows). */
const NEXT = new Set(['PageDown', 'ArrowDown']);
const PREVIOUS = new Set(['PageUp', 'ArrowUp']);
/** Older notifications listed per "Show older". */
const OLDER_PAGE = 50;
/** How many notifications the client keeps by default (`maxItems`): holding that many, it may have let go of older ones. */
const KEPT_BY_DEFAULT = 200;

interface FeedProps {
  client: HeraldClient;
  /** Oldest first, as the client holds them; shown newest first. */
  items: readonly HeraldItem[];
  busy: boolean;
  now: number;
  format: Intl.RelativeTimeFormat;
  mutes: Mutes;
  actions: Actions;
  /** The server's unread count (the badge's). */
  unreadCount: number | undefined;
}

/**
 * The notifications as an ARIA `feed` of `article`s, newest first. While the reader is scrolled down or
 * has focus inside the feed, new notifications wait behind an "N new" button instead of pushing what
 * they read out of place; at the top they appear at once. Articles seen at least half for a moment are
 * acked (`shown`), which feeds delivery status and latency.
 */
export function Feed({ client, items, busy, now, format, mutes, actions, unreadCount }: FeedProps) {
  const list = useRef<HTMLDivElement>(null);
  const [scrolled, setScrolled] = useState(false);
  const [focusInside, setFocusInside] = useState(false);
  const [, reveal] = useState(0);
  const newest = items.at(-1)?.offset;
  // The newest offset shown: it follows the stream unless the reader is somewhere in the list.
  const shownUpTo = useRef(newest);
  if (!(scrolled || focusInside) || shownUpTo.current === undefined) shownUpTo.current = newest;
  const upTo = shownUpTo.current;
  const visible = items
    .filter((item) => upTo !== undefined && compareOffsets(item.offset, upTo) <= 0)
    .reverse();
  const waiting = items.length - visible.length;

  useShownAcks(client, list, visible);

  // Older notifications than the client keeps (its newest `maxItems`, 200 by default), listed on demand,
  // 50 at a time, newest first: the badge counts them, so the feed must reach them. `end`: the oldest
  // the inbox keeps is shown.
  const [older, setOlder] = useState<HeraldItem[]>([]);
  const [end, setEnd] = useState(false);
  // What the client lets go of as new ones arrive (it keeps its newest) joins the older ones, once some
  // are shown: they were between the two lists, in neither.
  const kept = useRef(items);
  useEffect(() => {
    const before = kept.current;
    kept.current = items;
    const oldest = items[0]?.offset;
    if (older.length === 0 || oldest === undefined) return;
    const dropped = before.filter((item) => compareOffsets(item.offset, oldest) < 0).reverse();
    if (dropped.length > 0)
      setOlder((shown) => [
        ...dropped.filter((item) => !shown.some((old) => old.offset === item.offset)),
        ...shown,
      ]);
  }, [items, older.length]);
  // Everything read (mark all read, here or elsewhere): the older ones too.
  useEffect(() => {
    if (unreadCount === 0)
      setOlder((shown) =>
        shown.some((item) => !item.read) ? shown.map((item) => ({ ...item, read: true })) : shown,
      );
  }, [unreadCount]);
  // Older ones may exist: the client holds as many as it keeps, or fewer unread than the badge counts.
  const mayHaveOlder =
    older.length > 0 ||
    items.length >= KEPT_BY_DEFAULT ||
    (unreadCount ?? 0) > items.filter((item) => !item.read).length;
  const showOlder = () => {
    const before = older.at(-1)?.offset ?? items[0]?.offset;
    if (before === undefined) return;
    actions.run(
      'show older notifications',
      () => client.list({ before, limit: OLDER_PAGE }),
      (page) => {
        const fresh = (page.items as HeraldItem[])
          .filter((item) => compareOffsets(item.offset, before) < 0)
          .reverse();
        setOlder((shown) => [...shown, ...fresh]);
        if (page.nextBefore === null || fresh.length === 0) setEnd(true);
      },
    );
  };
  const readOlder = (id: string) =>
    setOlder((shown) => shown.map((item) => (item.id === id ? { ...item, read: true } : item)));
  const size = end ? visible.length + older.length : -1;

  const showNew = () => {
    shownUpTo.current = newest;
    reveal((n) => n + 1);
    list.current?.scrollTo({ top: 0 });
    requestAnimationFrame(() => list.current?.querySelector<HTMLElement>('article')?.focus());
  };

  const onKeyDown = (event: KeyboardEvent) => {
    const article = (event.target as HTMLElement).closest?.('article');
    if (!article || !(NEXT.has(event.key) || PREVIOUS.has(event.key))) return;
    if (event.target !== article && event.key.startsWith('Arrow')) return;
    const sibling = NEXT.has(event.key) ? article.nextElementSibling : article.previousElementSibling;
    if (sibling instanceof HTMLElement) {
      event.preventDefault();
      sibling.focus();
    }
  };

  return (
    <div class="feed-frame">
      <div class="new-slot">
        {waiting > 0 ? (
          <button type="button" class="new-button" onClick={showNew} part="new-button">
            {waiting} new
          </button>
        ) : null}
      </div>
      <div
        ref={list}
        class="feed"
        onScroll={(event) => setScrolled((event.currentTarget as HTMLElement).scrollTop > 4)}
      >
        {visible.length > 0 ? (
          <div
            role="feed"
            aria-label="Notifications"
            aria-busy={busy ? 'true' : 'false'}
            onFocusIn={() => setFocusInside(true)}
            onFocusOut={(event) =>
              setFocusInside(list.current?.contains(event.relatedTarget as Node) ?? false)
            }
            onKeyDown={onKeyDown}
          >
            {[...visible, ...older].map((item, index) => (
              <Entry
                key={item.offset}
                client={client}
                item={item}
                index={index}
                size={size}
                now={now}
                format={format}
                mutes={mutes}
                actions={actions}
                // The older ones are the feed's own: the client's store does not hold them.
                {...(index >= visible.length ? { onRead: readOlder } : {})}
              />
            ))}
          </div>
        ) : (
          // A feed must contain articles: until the first arrives, a note instead.
          <p class="empty">{busy ? 'Loading…' : 'No notifications yet.'}</p>
        )}
        {visible.length > 0 && !end && mayHaveOlder ? (
          <button type="button" class="link-button older-button" onClick={showOlder}>
            Show older
          </button>
        ) : null}
      </div>
    </div>
  );
}

function Entry(props: {
  client: HeraldClient;
  item: HeraldItem;
  index: number;
  size: number;
  now: number;
  format: Intl.RelativeTimeFormat;
  mutes: Mutes;
  actions: Actions;
  /** Told when it was marked read (an older notification, which the client's store does not hold). */
  onRead?: (id: string) => void;
}) {
  const { client, item, index, size, now, format, mutes, actions, onRead } = props;
  const { title, body } = describe(item);
  const key = item.offset.replace(/[^0-9a-z]/gi, '-');
  return (
    <article
      class={item.read ? 'entry' : 'entry unread'}
      // biome-ignore lint/a11y/noNoninteractiveTabindex: the ARIA feed pattern makes each article focusable (Page Down / Page Up move between them)
      tabIndex={0}
      aria-posinset={index + 1}
      aria-setsize={size}
      aria-labelledby={`title-${key}`}
      aria-describedby={`body-${key}`}
      data-id={item.id}
      data-offset={item.offset}
      part="entry"
    >
      <div class="entry-main">
        <h3 id={`title-${key}`} class="entry-title">
          {item.read ? null : <span class="visually-hidden">Unread: </span>}
          <bdi>{title}</bdi>
        </h3>
        <p id={`body-${key}`} class="entry-body">
          {body}
        </p>
      </div>
      <div class="entry-side">
        <time dateTime={item.createdAt} title={new Date(item.createdAt).toLocaleString()}>
          {relativeTime(item.createdAt, now, format)}
        </time>
        {item.read ? null : (
          <button
            type="button"
            class="link-button"
            aria-label={`Mark read: ${title}`}
            onClick={(event) => {
              // The button goes with the unread state: pressed from the keyboard (a click with no
              // pointer, detail 0), the focus stays in the feed, on its article, rather than falling to
              // the page. A pointer's click leaves the focus where the pointer puts it.
              if (event.detail === 0) (event.currentTarget.closest('article') as HTMLElement | null)?.focus();
              actions.run(
                'mark read',
                () => client.markRead([item.id]),
                () => onRead?.(item.id),
              );
            }}
          >
            Mark read
          </button>
        )}
        <MuteButton item={item} mutes={mutes} title={title} />
      </div>
    </article>
  );
}

/** Acks articles that are at least half on screen while the page is visible. */
function useShownAcks(
  client: HeraldClient,
  list: { current: HTMLElement | null },
  visible: readonly HeraldItem[],
) {
  const observer = useRef<IntersectionObserver | undefined>(undefined);
  useEffect(() => {
    if (typeof IntersectionObserver !== 'function' || !list.current) return;
    observer.current = new IntersectionObserver(
      (entries) => {
        if (document.visibilityState !== 'visible') return;
        const ids = entries
          .filter((entry) => entry.isIntersecting)
          .map((entry) => (entry.target as HTMLElement).dataset.id)
          .filter((id): id is string => id !== undefined);
        if (ids.length > 0) client.shown(ids);
      },
      { root: list.current, threshold: 0.5 },
    );
    return () => observer.current?.disconnect();
  }, [client, list]);
  useEffect(() => {
    const watching = observer.current;
    if (!watching || !list.current) return;
    for (const article of list.current.querySelectorAll('article')) watching.observe(article);
  }, [visible, list]);
}
