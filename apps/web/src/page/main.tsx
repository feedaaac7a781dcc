import { createHeraldClient } from '@herald/client';
import { render } from 'preact';
import { Inbox } from '../inbox/inbox.js';

const client = createHeraldClient({
  url: location.origin,
  getToken: async () => {
    const response = await fetch('/dev/token', { method: 'POST' });
    return ((await response.json()) as { token: string }).token;
  },
});
const root = document.getElementById('app');
if (root) render(<Inbox client={client} />, root);
