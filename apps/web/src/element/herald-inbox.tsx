/** `<herald-inbox>` (skeleton: filled in by the element commit). */
class HeraldInboxElement extends HTMLElement {
  connectedCallback(): void {
    this.attachShadow({ mode: 'open' });
  }
}
if (!customElements.get('herald-inbox')) customElements.define('herald-inbox', HeraldInboxElement);
