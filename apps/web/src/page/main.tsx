// The demo inbox page: `<herald-inbox>` for the user named by `?user=` (default: the server's demo
// user), with tokens from the development-only route `POST /dev/token`, which names whose they are.
// `?topics=news,releases`: the token lets the user subscribe to those topics themselves.
import { createHeraldClient } from '@herald/client';
import { tokenFrom } from '../element/herald-inbox.js';
import { pushControl } from './push.js';

const params = new URLSearchParams(location.search);
const user = params.get('user') ?? undefined;
const topics = params.get('topics')?.split(',').filter(Boolean);
const who = document.getElementById('who');
const inbox = document.querySelector('herald-inbox');
if (inbox) {
  const getToken = tokenFrom(
    '/dev/token',
    user,
    (answer) => {
      if (who && typeof answer.userId === 'string') who.textContent = answer.userId;
    },
    topics?.length ? { topics } : {},
  );
  // The page's own client (the element uses it): the push control registers through it too.
  const client = createHeraldClient({ url: location.origin, getToken });
  inbox.client = client;
  const button = document.getElementById('push');
  const status = document.getElementById('push-state');
  if (button instanceof HTMLButtonElement && status) pushControl(client, button, status);
}
