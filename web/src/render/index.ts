// Output renderers: pure functions from a Jupyter output (nbformat 4) to DOM, shared by the
// notebook page and the print view. This file is the contract.
//
// Contract (the notebook page and the print view rely on exactly this):
//   renderOutput(output, opts)   one output (stream, display_data, execute_result, error) → element
//   appendStream(el, text)       adds stream text to an element renderOutput made for a stream
//                                (carriage returns overwrite the line, ANSI colours kept)
//   renderMarkdown(source, opts) a markdown cell's source → element (math via KaTeX, sanitised)
//   highlightCode(source, lang)  a code cell's source → <pre> with static highlighting
//   MIME_PRIORITY                the bundle types in the order they are chosen
import type * as nbformat from '@jupyterlab/nbformat';
import { h } from '../shell/dom';

export interface RenderOptions {
  /** Whether the notebook is trusted (the user wrote it). Untrusted HTML and SVG are sanitised. */
  trusted: boolean;
}

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

function joined(v: nbformat.MultilineString | undefined): string {
  return Array.isArray(v) ? v.join('') : (v ?? '');
}

/** renderOutput makes the element of one output. */
export function renderOutput(output: nbformat.IOutput, _opts: RenderOptions): HTMLElement {
  switch (output.output_type) {
    case 'stream': {
      const s = output as nbformat.IStream;
      const el = h('pre', { class: `nb-output nb-stream nb-${s.name}` });
      appendStream(el, joined(s.text));
      return el;
    }
    case 'error': {
      const e = output as nbformat.IError;
      return h('pre', { class: 'nb-output nb-error' }, e.traceback.join('\n'));
    }
    case 'execute_result':
    case 'display_data': {
      const d = output as nbformat.IDisplayData;
      return h('pre', { class: 'nb-output' }, joined(d.data['text/plain'] as nbformat.MultilineString));
    }
    default:
      return h('div', { class: 'nb-output' });
  }
}

/** appendStream adds text to a stream's element. */
export function appendStream(el: HTMLElement, text: string): void {
  el.append(text);
}

/** renderMarkdown renders a markdown cell's source. */
export function renderMarkdown(source: string, _opts: RenderOptions): HTMLElement {
  return h('div', { class: 'nb-markdown' }, source);
}

/** highlightCode is a code cell's source, highlighted statically. */
export function highlightCode(source: string, _language: string): HTMLElement {
  return h('pre', { class: 'nb-code' }, source);
}
