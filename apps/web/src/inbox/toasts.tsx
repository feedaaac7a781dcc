import type { HeraldClient, HeraldItem } from '@herald/client';
import { useEffect, useState } from 'preact/hooks';
import { describe } from './format.js';

/** How long a toast stays after the last notification it shows. */
const TOAST_MS = 6000;

/**
 * New live notifications as a toast, in one tab of the browser only (the SDK's `toast` event: the
 * focused tab, else the leader), inside a polite live region that exists from the first render (a
 * region added together with its text is not announced by every screen reader). One slot, fixed in a
 * corner: a newer notification replaces the text ("and 2 more" counts those it replaced) instead of
 * stacking, so that no toast ever pushes another, or anything else, out of place.
 */
export function Toasts({ client }: { client: HeraldClient }) {
  const [toast, setToast] = useState<{ item: HeraldItem; more: number } | undefined>(undefined);
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const off = client.on('toast', (item) => {
      setToast((shown) => ({ item, more: shown ? shown.more + 1 : 0 }));
      clearTimeout(timer);
      timer = setTimeout(() => setToast(undefined), TOAST_MS);
    });
    return () => {
      off();
      clearTimeout(timer);
    };
  }, [client]);
  const shown = toast ? describe(toast.item) : undefined;
  return (
    <div class="toasts" role="status" aria-live="polite" aria-label="New notifications" part="toasts">
      {toast && shown ? (
        <div class="toast" key={toast.item.id} data-id={toast.item.id}>
          <div class="toast-text">
            {/* The sender's text in <bdi>: a bidi control in it (U+202E) stays in it, and does not turn
                the toast's own words around it ("(and 1 more)"). At most 4 lines are shown: a 16 KiB
                payload would otherwise cover the page, Dismiss included. */}
            <p class="toast-message">
              <strong>
                <bdi>{shown.title}</bdi>
              </strong>
              {shown.body ? (
                <span>
                  {' '}
                  <bdi>{shown.body}</bdi>
                </span>
              ) : null}
            </p>
            {toast.more > 0 ? <span class="toast-more">(and {toast.more} more)</span> : null}
          </div>
          <button
            type="button"
            class="icon-button"
            aria-label={`Dismiss: ${shown.title}`}
            onClick={() => setToast(undefined)}
          >
            ×
          </button>
        </div>
      ) : null}
    </div>
  );
}
