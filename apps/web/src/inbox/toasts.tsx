import type { HeraldClient, HeraldItem } from '@herald/client';
import { useEffect, useState } from 'preact/hooks';
import { describe } from './format.js';

/** Toasts on screen at once (older ones leave first), and how long one stays. */
const MAX_TOASTS = 3;
const TOAST_MS = 6000;

/**
 * New live notifications as toasts, in one tab of the browser only (the SDK's `toast` event: the
 * focused tab, else the leader), inside a polite live region that exists from the first render (a
 * region added together with its text is not announced by every screen reader). Fixed in a corner, so
 * a toast never moves the page.
 */
export function Toasts({ client }: { client: HeraldClient }) {
  const [toasts, setToasts] = useState<HeraldItem[]>([]);
  useEffect(() => {
    const timers = new Set<ReturnType<typeof setTimeout>>();
    const off = client.on('toast', (item) => {
      setToasts((shown) => [...shown, item].slice(-MAX_TOASTS));
      const timer = setTimeout(() => {
        timers.delete(timer);
        setToasts((shown) => shown.filter((toast) => toast.id !== item.id));
      }, TOAST_MS);
      timers.add(timer);
    });
    return () => {
      off();
      for (const timer of timers) clearTimeout(timer);
    };
  }, [client]);
  const dismiss = (id: string) => setToasts((shown) => shown.filter((toast) => toast.id !== id));
  return (
    <div class="toasts" role="status" aria-live="polite" aria-label="New notifications" part="toasts">
      {toasts.map((item) => {
        const { title, body } = describe(item);
        return (
          <div class="toast" key={item.id} data-id={item.id}>
            <div class="toast-text">
              <strong>{title}</strong>
              {body ? <span> {body}</span> : null}
            </div>
            <button
              type="button"
              class="icon-button"
              aria-label={`Dismiss: ${title}`}
              onClick={() => dismiss(item.id)}
            >
              ×
            </button>
          </div>
        );
      })}
    </div>
  );
}
