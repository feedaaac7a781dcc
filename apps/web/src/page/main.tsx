// The demo inbox page: `<herald-inbox>` for the user named by `?user=` (default: the server's demo
// user), with tokens from the development-only route `POST /dev/token`, which names whose they are.
import { tokenFrom } from '../element/herald-inbox.js';

const user = new URLSearchParams(location.search).get('user') ?? undefined;
const who = document.getElementById('who');
const inbox = document.querySelector('herald-inbox');
if (inbox) {
  inbox.getToken = tokenFrom('/dev/token', user, (answer) => {
    if (who && typeof answer.userId === 'string') who.textContent = answer.userId;
  });
}
