// Outputs that need JavaScript (HTML with scripts, application/javascript, Plotly figures) run
// in a frame of their own, never in the page. The frame is the server's /output-frame: a
// fixed document, sandboxed twice (the iframe's sandbox="allow-scripts" and the sandbox of
// its own Content-Security-Policy, neither with allow-same-origin), so its origin is opaque:
// what runs there reads no cookie, storage or DOM of the page, and the API refuses what it
// sends. Its policy is its own (inline scripts allowed there, and only there), where srcdoc
// would inherit the page's, which refuses every inline script.
//
// The page posts the output to the frame once, on the frame's first load (with target "*",
// the only one an opaque origin takes); the frame posts its height back, which the page takes
// only from that frame's window. The frame's script is src/outputframe/main.ts.
import type * as nbformat from '@jupyterlab/nbformat';
import { config } from '../shell/config';
import { h } from '../shell/dom';

/** FrameMessage is what the page posts to an output's frame. */
export interface FrameMessage {
  nbkubeOutput: 1;
  mime: string;
  /** The output's value of that type: a string (HTML, JavaScript) or a Plotly figure. */
  value: unknown;
  metadata: unknown;
}

/** FRAMED_TYPES are the bundle types that only a frame shows. */
export const FRAMED_TYPES = ['application/vnd.plotly.v1+json', 'application/javascript'];

// A <script> element, whatever its case or attributes.
const scriptTag = /<script[\s/>]/i;

/** needsFrame reports whether an output of the type, with the value, runs in a frame: HTML
 * with a script, JavaScript and Plotly figures. HTML without one (pandas' tables) is shown in
 * the page, sanitised, as are all other types. */
export function needsFrame(mime: string, html: string): boolean {
  return FRAMED_TYPES.includes(mime) || (mime === 'text/html' && scriptTag.test(html));
}

/** The tallest a frame grows; taller content scrolls inside it. */
const MAX_HEIGHT = 20000;

/** frameURL is the frame's document under the page's base URL. */
function frameURL(): string {
  try {
    return config().baseUrl + 'output-frame';
  } catch {
    // A page without a configuration (a unit test's): the root.
    return '/output-frame';
  }
}

/** renderFramed makes the frame that runs an output of type mime. */
export function renderFramed(mime: string, value: unknown, metadata: nbformat.OutputMetadata | undefined): HTMLElement {
  const frame = h('iframe', {
    class: 'nb-frame',
    src: frameURL(),
    sandbox: 'allow-scripts',
    title: mime === 'application/vnd.plotly.v1+json' ? 'Plotly figure' : 'Output that runs scripts',
    referrerpolicy: 'no-referrer',
    // A long notebook's frames load as they come near the view.
    loading: 'lazy',
    'data-mime-type': mime,
  });
  let sent = false;
  frame.addEventListener('load', () => {
    // Once: a later load is the frame gone somewhere else, which gets nothing.
    if (sent) {
      return;
    }
    sent = true;
    const msg: FrameMessage = { nbkubeOutput: 1, mime, value, metadata: metadata ?? {} };
    frame.contentWindow?.postMessage(msg, '*');
  });
  listen();
  return h('div', { class: 'nb-framed' }, frame);
}

let listening = false;

/** listen sizes each frame to the height it reports, once per page. */
function listen(): void {
  if (listening) {
    return;
  }
  listening = true;
  window.addEventListener('message', (e: MessageEvent) => {
    const height = (e.data as { nbkubeFrameHeight?: unknown } | null)?.nbkubeFrameHeight;
    if (typeof height !== 'number' || !Number.isFinite(height) || e.source === null) {
      return;
    }
    for (const f of document.querySelectorAll<HTMLIFrameElement>('iframe.nb-frame')) {
      if (f.contentWindow === e.source) {
        f.style.height = `${Math.min(Math.max(0, Math.ceil(height)), MAX_HEIGHT)}px`;
        f.dataset.sized = '';
        return;
      }
    }
  });
}
