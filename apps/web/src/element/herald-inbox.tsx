import { createHeraldClient, type HeraldClient, HeraldUnauthorizedError } from '@herald/client';
import { render } from 'preact';
import { Inbox } from '../inbox/inbox.js';
import styles from '../inbox/styles.css?inline';

/**
 * A user token from `endpoint` (POST, answering `{ token }`): your backend's route, which knows who is
 * signed in. 401, 403 and 404 mean no token for this page, which stops the client's retries. `onAnswer`
 * sees each whole answer (the demo route's names its user); `extra` goes into the body beside `userId`.
 */
export function tokenFrom(
  endpoint: string,
  userId?: string,
  onAnswer?: (body: Record<string, unknown>) => void,
  extra: Record<string, unknown> = {},
): () => Promise<string> {
  return async () => {
    const response = await fetch(endpoint, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...(userId ? { userId } : {}), ...extra }),
    });
    // A client error: signed out (401, 403), no such route (404: e.g. the demo route outside development
    // mode), a request the route refuses (400, 422, …). Retrying will not help, so the client stops
    // until reconnect(). A timeout (408) or a rate limit (429) is retried, as a 5xx is.
    const { status } = response;
    if (status > 399 && status < 500 && status !== 408 && status !== 429)
      throw new HeraldUnauthorizedError(`no token: ${endpoint} answered ${status}`);
    if (!response.ok) throw new Error(`${endpoint} answered ${response.status}`);
    // A 2xx without a token (a sign-in page the session's expiry redirected to) is signed out too: retried,
    // it was "Unexpected token '<'" and another try every few seconds, for good.
    const type = response.headers.get('content-type') ?? '';
    const body = (type.includes('json') ? await response.json().catch(() => undefined) : undefined) as
      | { token?: unknown }
      | undefined;
    if (typeof body?.token !== 'string')
      throw new HeraldUnauthorizedError(
        `no token: ${endpoint} answered ${status} without a token (${type || 'no content type'}: a sign-in page?)`,
      );
    onAnswer?.(body as { token: string });
    return body.token;
  };
}

/**
 * `<herald-inbox>`: the live inbox as a custom element any page can embed, its styles in a shadow root
 * (nothing leaks either way). Attributes: `token-url` (POST → `{ token }`), `url` (the realtime servers,
 * default this origin), `user` (sent to `token-url` as `userId`, for the demo route), `open`, `inline`,
 * `lang`. Or set `element.client` to a `createHeraldClient(…)` of your own (the element then leaves it
 * open when removed), or `element.getToken`.
 *
 * @example
 * ```html
 * <script type="module" src="/element/herald-inbox.js"></script>
 * <herald-inbox token-url="/api/herald-token" url="https://rt.example.com"></herald-inbox>
 * ```
 */
export class HeraldInboxElement extends HTMLElement {
  #client: HeraldClient | undefined;
  #getToken: (() => string | Promise<string>) | undefined;
  #own: HeraldClient | undefined;
  #root: ShadowRoot | undefined;
  #mount: HTMLElement | undefined;

  /** A client to use instead of one the element makes. */
  get client(): HeraldClient | undefined {
    return this.#client;
  }
  set client(client: HeraldClient | undefined) {
    this.#client = client;
    queueMicrotask(() => this.#render());
  }

  /** Where the element's own client gets tokens, instead of `token-url`. */
  get getToken(): (() => string | Promise<string>) | undefined {
    return this.#getToken;
  }
  set getToken(getToken: (() => string | Promise<string>) | undefined) {
    this.#getToken = getToken;
    this.#dropOwnClient();
    queueMicrotask(() => this.#render());
  }

  /** Every attribute is followed: `token-url`, `url` and `user` name whose inbox it is (a sign-in). */
  static get observedAttributes(): string[] {
    return ['token-url', 'url', 'user', 'open', 'inline', 'lang'];
  }

  attributeChangedCallback(name: string, previous: string | null, value: string | null): void {
    if (previous === value) return;
    // Another user's (or server's) inbox: the old one is closed and nothing of it stays on screen.
    if (name === 'token-url' || name === 'url' || name === 'user') this.#dropOwnClient();
    queueMicrotask(() => this.#render());
  }

  connectedCallback(): void {
    if (!this.#root) {
      this.#root = this.attachShadow({ mode: 'open' });
      const style = document.createElement('style');
      style.textContent = styles;
      this.#mount = document.createElement('div');
      this.#root.append(style, this.#mount);
    }
    // After the current task: properties set right after creating the element are seen.
    queueMicrotask(() => this.#render());
  }

  /** Closes the element's own client (not one given as `client`), and empties the view that showed it. */
  #dropOwnClient(): void {
    if (!this.#own) return;
    if (this.#mount) render(null, this.#mount);
    this.#own.close();
    this.#own = undefined;
  }

  disconnectedCallback(): void {
    queueMicrotask(() => {
      if (this.isConnected || !this.#mount) return;
      render(null, this.#mount);
      this.#dropOwnClient();
    });
  }

  #render(): void {
    if (!this.isConnected || !this.#mount) return;
    const client = this.#client ?? this.#ownClient();
    if (!client) return;
    render(
      <Inbox
        client={client}
        open={this.hasAttribute('open')}
        inline={this.hasAttribute('inline')}
        {...(this.getAttribute('lang') ? { locale: this.getAttribute('lang') as string } : {})}
      />,
      this.#mount,
    );
  }

  #ownClient(): HeraldClient | undefined {
    if (this.#own) return this.#own;
    const tokenUrl = this.getAttribute('token-url');
    const getToken =
      this.getToken ?? (tokenUrl ? tokenFrom(tokenUrl, this.getAttribute('user') ?? undefined) : undefined);
    if (!getToken) {
      this.#mount?.replaceChildren('herald-inbox: set token-url, or the client or getToken property.');
      return undefined;
    }
    this.#own = createHeraldClient({ url: this.getAttribute('url') ?? location.origin, getToken });
    return this.#own;
  }
}

if (!customElements.get('herald-inbox')) customElements.define('herald-inbox', HeraldInboxElement);

declare global {
  interface HTMLElementTagNameMap {
    'herald-inbox': HeraldInboxElement;
  }
}
