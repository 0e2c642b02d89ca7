// Output renderers: pure functions from a Jupyter output (nbformat 4) to DOM, shared by the
// notebook page and the print view. This file is the contract; the work is in the modules
// beside it (mime, stream, ansi, markdown, math, highlight, sanitize) and render.css.
//
// Contract (the notebook page and the print view rely on exactly this):
//   renderOutput(output, opts)   one output (stream, display_data, execute_result, error) → element
//   appendStream(el, text)       adds stream text to an element renderOutput made for a stream
//                                (carriage returns overwrite the line, ANSI colours kept)
//   renderMarkdown(source, opts) a markdown cell's source → element (math via KaTeX, sanitised)
//   highlightCode(source, lang)  a code cell's source → <pre> with static highlighting
//   MIME_PRIORITY                the bundle types in the order they are chosen
//
// Every output element has the class nb-output, and nb-output-scrolled, which caps its height
// with a scroll bar (render.css; remove the class to show an output in full; print ignores it).
// HTML and SVG shown in the page are always sanitised and never run scripts (see sanitize.ts);
// outputs that need scripts run in a sandboxed frame of their own (frame.ts).
// render.css @imports katex/dist/katex.min.css, so every page using the renderers gets KaTeX's
// styles and fonts (imported from CSS rather than here: the unit tests' bundle keeps packages
// external, and Node cannot load a package's .css).
import './render.css';
import type * as nbformat from '@jupyterlab/nbformat';
import { h } from '../shell/dom';
import { ansiToFragment } from './ansi';
import { markdownToHTML } from './markdown';
import { pickMime, renderMime, text, unknownTypes } from './mime';
import { sanitizeHTML } from './sanitize';
import { writeStream } from './stream';

export { MIME_PRIORITY, pickMime } from './mime';
export { highlightCode, isPython } from './highlight';

export interface RenderOptions {
  /** Whether the notebook is trusted (the user wrote it). HTML and SVG are sanitised either
   * way; a trusted notebook's HTML may keep its <style>. */
  trusted: boolean;
  /** A markdown cell's attachments: its images written as attachment:name. */
  attachments?: nbformat.IAttachments;
}

/** renderOutput makes the element of one output. */
export function renderOutput(output: nbformat.IOutput, opts: RenderOptions): HTMLElement {
  switch (output.output_type) {
    case 'stream': {
      const s = output as nbformat.IStream;
      const name = s.name === 'stderr' ? 'stderr' : 'stdout';
      const el = h('pre', { class: `nb-output nb-output-scrolled nb-stream nb-${name}` });
      writeStream(el, text(s.text));
      return el;
    }
    case 'error':
      return renderError(output as nbformat.IError);
    case 'execute_result':
    case 'display_data':
    case 'update_display_data': {
      const d = output as nbformat.IDisplayData;
      const data = d.data ?? {};
      const mime = pickMime(data);
      const el = h('div', {
        class: `nb-output nb-output-scrolled nb-${output.output_type.replace(/_/g, '-')}`,
        'data-mime-type': mime,
      });
      if (mime === undefined) {
        el.append(h('p', { class: 'nb-unsupported' }, unknownTypes(Object.keys(data))));
      } else {
        el.append(renderMime(mime, data, d.metadata, opts.trusted));
      }
      return el;
    }
    default:
      return h('div', { class: 'nb-output nb-unsupported' });
  }
}

/** renderError is a traceback with its ANSI colours; the exception's name and value are in its
 * text (the last line of IPython's traceback) and in data attributes. */
function renderError(e: nbformat.IError): HTMLElement {
  const el = h('pre', {
    class: 'nb-output nb-output-scrolled nb-error',
    'data-ename': e.ename,
    'data-evalue': e.evalue,
  });
  const tb = Array.isArray(e.traceback) ? e.traceback.join('\n') : '';
  if (tb.trim() === '') {
    el.append(h('span', { class: 'nb-ename' }, e.ename), ': ', h('span', { class: 'nb-evalue' }, e.evalue));
  } else {
    el.append(ansiToFragment(tb));
  }
  return el;
}

/** appendStream adds text to the element renderOutput made for a stream (or a text/plain
 * output): carriage returns overwrite the line as in a terminal, ANSI colours carry on, and
 * each call costs only its own text. */
export function appendStream(el: HTMLElement, text: string): void {
  writeStream(el, text);
}

/** renderMarkdown renders a markdown cell's source (or a text/markdown output), with math. */
export function renderMarkdown(source: string, opts: RenderOptions): HTMLElement {
  const el = h('div', { class: 'nb-markdown' });
  el.append(sanitizeHTML(markdownToHTML(source), opts.trusted));
  resolveAttachments(el, opts.attachments);
  return el;
}

/** resolveAttachments points attachment:name images at the cell's attachment (or removes a
 * source that names none). */
function resolveAttachments(el: HTMLElement, attachments: nbformat.IAttachments | undefined): void {
  for (const img of el.querySelectorAll('img')) {
    const src = img.getAttribute('src') ?? '';
    if (!src.startsWith('attachment:')) {
      continue;
    }
    let name = src.slice('attachment:'.length);
    try {
      name = decodeURIComponent(name);
    } catch {
      // Not %-encoded: the name as written.
    }
    const bundle = attachments?.[name];
    const mime = bundle && ['image/png', 'image/jpeg', 'image/gif', 'image/webp'].find((m) => bundle[m] !== undefined);
    if (bundle && mime) {
      img.setAttribute('src', `data:${mime};base64,${text(bundle[mime]).replace(/\s+/g, '')}`);
    } else {
      img.removeAttribute('src');
    }
  }
}
