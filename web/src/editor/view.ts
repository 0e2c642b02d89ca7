// What every CodeMirror editor of the pages has: the look, and the page's CSP nonce.
import { EditorView } from '@codemirror/view';

/** theme is the editors' look: the pages' monospace font, no outline of their own. */
export const theme = EditorView.theme({
  '&': { fontSize: '14px' },
  '.cm-content': { fontFamily: 'var(--nb-mono)', padding: '4px 0' },
  '.cm-scroller': { fontFamily: 'var(--nb-mono)', lineHeight: '1.4' },
  '&.cm-focused': { outline: 'none' },
});

let nonce: string | undefined | null = null;

/** pageNonce is the CSP nonce the server gave the page's own elements, if any: CodeMirror puts
 * its styles in a <style> element, which a style-src without 'unsafe-inline' admits only with
 * the page's nonce. */
export function pageNonce(): string | undefined {
  if (nonce === null) {
    const el = document.querySelector<HTMLElement>('script[nonce], style[nonce], link[nonce]');
    nonce = el?.nonce || el?.getAttribute('nonce') || undefined;
  }
  return nonce;
}
