// Small DOM helpers: elements are made with h(), never from HTML strings, so text from
// notebooks and the server is always text.

type Attrs = Record<string, string | number | boolean | undefined | null>;
type Child = Node | string | null | undefined | false;

/** h makes an element with attributes (on* are not allowed: use listeners) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) {
      continue;
    }
    if (k.startsWith('on')) {
      throw new Error('h: attach listeners with addEventListener, not ' + k);
    }
    el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) {
      continue;
    }
    el.append(c);
  }
  return el;
}

/** clear removes an element's children. */
export function clear(el: Element): void {
  el.replaceChildren();
}

/** startDownload has the browser download href (an attachment), as a click on a download link does. */
export function startDownload(href: string): void {
  const a = h('a', { href, download: '', hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
}
