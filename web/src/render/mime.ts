// Rich outputs (execute_result, display_data): the first MIME type of the bundle, in Jupyter's
// order, rendered by its renderer. Outputs that need JavaScript run in a frame (frame.ts);
// widgets and types nothing here knows say what they are.
import type * as nbformat from '@jupyterlab/nbformat';
import { h } from '../shell/dom';
import { needsFrame, renderFramed } from './frame';
import { markdownToHTML } from './markdown';
import { stripDelimiters, texToHTML } from './math';
import { sanitizeHTML, sanitizeSVG } from './sanitize';
import { writeStream } from './stream';

/** WIDGET_TYPE is an ipywidgets widget's view, which the page does not run. */
export const WIDGET_TYPE = 'application/vnd.jupyter.widget-view+json';

/** The bundle types in the order they are chosen, as Notebook 6's (a widget first, so that it
 * says what it is rather than show its text), with Plotly's figure before the HTML that
 * stands in for it. */
export const MIME_PRIORITY = [
  WIDGET_TYPE,
  'application/vnd.plotly.v1+json',
  'application/javascript',
  'text/html',
  'image/png',
  'image/jpeg',
  'image/svg+xml',
  'text/markdown',
  'text/latex',
  'application/json',
  'text/plain',
];

/** pickMime is the type of the bundle that is shown, or undefined when none is known. */
export function pickMime(data: nbformat.IMimeBundle): string | undefined {
  return MIME_PRIORITY.find((m) => data[m] !== undefined && data[m] !== null);
}

/** text is a bundle value as one string (nbformat allows a list of lines). */
export function text(v: unknown): string {
  if (Array.isArray(v)) {
    return v.join('');
  }
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
}

/** renderMime renders one type of a bundle into a fresh element. */
export function renderMime(
  mime: string,
  data: nbformat.IMimeBundle,
  metadata: nbformat.OutputMetadata | undefined,
  trusted: boolean,
): HTMLElement {
  const value = data[mime];
  if (needsFrame(mime, mime === 'text/html' ? text(value) : '')) {
    return renderFramed(mime, mime === 'application/vnd.plotly.v1+json' ? value : text(value), metadata);
  }
  switch (mime) {
    case WIDGET_TYPE:
      return unsupported(
        'This output is an interactive widget (ipywidgets); nbkube’s page does not run widgets yet.',
        data,
      );
    case 'text/html': {
      const el = h('div', { class: 'nb-html' });
      el.append(sanitizeHTML(text(value), trusted));
      return el;
    }
    case 'image/png':
    case 'image/jpeg':
      return image(mime, value, metadata, data);
    case 'image/svg+xml': {
      const el = h('div', { class: 'nb-svg' });
      el.append(sanitizeSVG(text(value)));
      return el;
    }
    case 'text/markdown': {
      const el = h('div', { class: 'nb-markdown' });
      el.append(sanitizeHTML(markdownToHTML(text(value)), trusted));
      return el;
    }
    case 'text/latex': {
      const el = h('div', { class: 'nb-latex' });
      el.append(sanitizeHTML(texToHTML(stripDelimiters(text(value)), true), false));
      return el;
    }
    case 'application/json': {
      const v = typeof value === 'string' ? safeParse(value) : value;
      return h('pre', { class: 'nb-json' }, JSON.stringify(v, null, 2) ?? '');
    }
    default: {
      // text/plain, and anything textual we do not know.
      const el = h('pre', { class: 'nb-text' });
      writeStream(el, text(value));
      return el;
    }
  }
}

/** unsupported says why an output is not shown, with its text/plain beside (a widget's repr). */
export function unsupported(why: string, data: nbformat.IMimeBundle): HTMLElement {
  const el = h('div', { class: 'nb-unsupported-output' }, h('p', { class: 'nb-unsupported' }, why));
  const plain = text(data['text/plain']);
  if (plain.trim() !== '') {
    const pre = h('pre', { class: 'nb-text' });
    writeStream(pre, plain);
    el.append(pre);
  }
  return el;
}

/** unknownTypes says that a bundle has no type the page can show, and names them (nothing for
 * an empty bundle, as Jupyter). */
export function unknownTypes(types: string[]): string {
  if (types.length === 0) {
    return '';
  }
  const named = types.join(', ');
  return types.length === 1
    ? `This output is of type ${named}, which nbkube’s page cannot show.`
    : `This output is of types ${named}, none of which nbkube’s page can show.`;
}

function safeParse(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

function image(
  mime: string,
  value: unknown,
  metadata: nbformat.OutputMetadata | undefined,
  data: nbformat.IMimeBundle,
): HTMLElement {
  const b64 = text(value).replace(/\s+/g, '');
  const meta = (metadata?.[mime] ?? {}) as { width?: unknown; height?: unknown; unconfined?: unknown };
  const dim = (v: unknown) => (typeof v === 'number' && v > 0 ? String(Math.round(v)) : undefined);
  // The text/plain beside an image (matplotlib's "<Figure size 640x480 with 1 Axes>") is its
  // best description for a screen reader.
  const alt = text(data['text/plain']).trim() || 'Output image';
  return h('img', {
    class: 'nb-image' + (meta.unconfined === true ? ' nb-unconfined' : ''),
    src: `data:${mime};base64,${b64}`,
    alt,
    width: dim(meta.width),
    height: dim(meta.height),
  });
}
