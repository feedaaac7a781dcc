// The demo inbox page: `<herald-inbox>` for the user named by `?user=` (default: the server's demo
// user), with tokens from the development-only route `POST /dev/token`.
import '../element/herald-inbox.js';

const user = new URLSearchParams(location.search).get('user');
const inbox = document.querySelector('herald-inbox');
if (inbox && user) inbox.setAttribute('user', user);
const who = document.getElementById('who');
if (who) who.textContent = user ?? 'the demo user';
