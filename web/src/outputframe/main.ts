// The script of an output's frame (/output-frame, see src/render/frame.ts): it takes one output
// from the page that embeds it, runs it, and tells the page its height as it changes. It runs
// in an opaque origin, so nothing here is trusted with anything of the page's; it is a classic
// script (not a module, which would need CORS from an opaque origin). Plotly's bundle is
// loaded only here, and only for a Plotly figure.

/** PLOTLY_FILE is the name of plotly.js among the assets (set by build.mjs). */
declare const PLOTLY_FILE: string;

interface Message {
  nbkubeOutput?: unknown;
  mime?: unknown;
  value?: unknown;
}

interface PlotlyFigure {
  data?: unknown[];
  layout?: Record<string, unknown>;
  config?: Record<string, unknown>;
  frames?: unknown[];
}

interface PlotlyModule {
  newPlot(el: HTMLElement, fig: PlotlyFigure): Promise<unknown>;
}

// Where this script came from: the assets, where plotly.js is too.
const assets = document.currentScript instanceof HTMLScriptElement ? document.currentScript.src : location.href;

/** report tells the page the content's height. */
function report(): void {
  const b = document.body;
  const height = Math.max(b.scrollHeight, Math.ceil(b.getBoundingClientRect().height));
  window.parent.postMessage({ nbkubeFrameHeight: height }, '*');
}

/** loadScript runs a script from url and resolves when it has run (or failed to load). */
function loadScript(url: string): Promise<void> {
  return new Promise((resolve) => {
    const s = document.createElement('script');
    s.src = url;
    s.addEventListener('load', () => resolve());
    s.addEventListener('error', () => resolve());
    document.head.append(s);
  });
}

/** runScripts runs the scripts that innerHTML left inert, in document order, each external
 * one before the next, as the parser would have. */
async function runScripts(root: HTMLElement): Promise<void> {
  for (const old of Array.from(root.querySelectorAll('script'))) {
    const s = document.createElement('script');
    for (const a of Array.from(old.attributes)) {
      s.setAttribute(a.name, a.value);
    }
    const src = old.getAttribute('src');
    if (src) {
      const loaded = new Promise<void>((resolve) => {
        s.addEventListener('load', () => resolve());
        s.addEventListener('error', () => resolve());
      });
      old.replaceWith(s);
      if (!old.hasAttribute('async') && !old.hasAttribute('defer')) {
        await loaded;
      }
    } else {
      s.textContent = old.textContent;
      old.replaceWith(s);
    }
  }
}

async function plot(fig: PlotlyFigure): Promise<void> {
  const el = document.createElement('div');
  el.className = 'nb-plotly';
  document.body.append(el);
  await loadScript(new URL(PLOTLY_FILE, assets).href);
  const plotly = (window as { Plotly?: PlotlyModule }).Plotly;
  if (!plotly) {
    el.textContent = 'Plotly could not be loaded.';
    return;
  }
  await plotly.newPlot(el, {
    data: fig.data ?? [],
    layout: fig.layout ?? {},
    config: { responsive: true, ...(fig.config ?? {}) },
    frames: fig.frames,
  });
}

async function show(mime: string, value: unknown): Promise<void> {
  switch (mime) {
    case 'application/vnd.plotly.v1+json':
      await plot((typeof value === 'string' ? JSON.parse(value) : value) as PlotlyFigure);
      return;
    case 'application/javascript': {
      // As in Notebook 6 and JupyterLab, the code finds the element it may draw in as `element`.
      const el = document.createElement('div');
      document.body.append(el);
      (window as { element?: HTMLElement }).element = el;
      const s = document.createElement('script');
      s.textContent = String(value);
      document.body.append(s);
      return;
    }
    default:
      document.body.innerHTML = String(value);
      await runScripts(document.body);
  }
}

let shown = false;
window.addEventListener('message', (e: MessageEvent) => {
  const m = e.data as Message | null;
  // One output, from the page that embeds the frame only.
  if (shown || e.source !== window.parent || !m || m.nbkubeOutput !== 1 || typeof m.mime !== 'string') {
    return;
  }
  shown = true;
  new ResizeObserver(report).observe(document.body);
  show(m.mime, m.value)
    .catch((err: unknown) => {
      const p = document.createElement('pre');
      p.className = 'nb-frame-error';
      p.textContent = 'Cannot show this output: ' + String(err);
      document.body.append(p);
    })
    .finally(report);
});
