// A DOM for unit tests under Node: jsdom's window, installed as the globals the modules use.
import { JSDOM } from 'jsdom';

/** installDOM makes document, window and the DOM classes global, once. */
export function installDOM(): void {
  if ((globalThis as { document?: unknown }).document) {
    return;
  }
  // pretendToBeVisual: requestAnimationFrame, which CodeMirror's editors need.
  const dom = new JSDOM('<!doctype html><html><body></body></html>', {
    url: 'http://localhost/',
    pretendToBeVisual: true,
  });
  const g = globalThis as Record<string, unknown>;
  g.window = dom.window;
  g.document = dom.window.document;
  // WebSocket too: once window exists, @jupyterlab/services takes the browser's WebSocket.
  for (const name of [
    'Node',
    'Element',
    'HTMLElement',
    'DocumentFragment',
    'Text',
    'DOMParser',
    'NodeFilter',
    'getComputedStyle',
    'requestAnimationFrame',
    'MutationObserver',
    'WebSocket',
  ]) {
    if (!(name in g) && name in dom.window) {
      const v = (dom.window as unknown as Record<string, unknown>)[name];
      g[name] = typeof v === 'function' && name[0] === name[0].toLowerCase() ? v.bind(dom.window) : v;
    }
  }
}
