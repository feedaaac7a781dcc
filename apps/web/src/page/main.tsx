// The demo inbox page: `<herald-inbox>` for the user named by `?user=` (default: the server's demo
// user), with tokens from the development-only route `POST /dev/token`, which names whose they are.
// `?topics=news,releases`: the token lets the user subscribe to those topics themselves.
import { tokenFrom } from '../element/herald-inbox.js';

const params = new URLSearchParams(location.search);
const user = params.get('user') ?? undefined;
const topics = params.get('topics')?.split(',').filter(Boolean);
const who = document.getElementById('who');
const inbox = document.querySelector('herald-inbox');
if (inbox) {
  inbox.getToken = tokenFrom(
    '/dev/token',
    user,
    (answer) => {
      if (who && typeof answer.userId === 'string') who.textContent = answer.userId;
    },
    topics?.length ? { topics } : {},
  );
}
