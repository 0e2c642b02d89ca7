// Rich outputs (execute_result, display_data): the first MIME type of the bundle, in Jupyter's
// order, rendered by its renderer.
import type * as nbformat from '@jupyterlab/nbformat';
import { h } from '../shell/dom';
import { markdownToHTML } from './markdown';
import { stripDelimiters, texToHTML } from './math';
import { sanitizeHTML, sanitizeSVG } from './sanitize';
import { writeStream } from './stream';

/** The bundle types in the order they are chosen, as Jupyter's. */
export const MIME_PRIORITY = [
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
  switch (mime) {
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
