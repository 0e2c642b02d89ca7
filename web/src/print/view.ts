// The print view of a notebook: every cell rendered statically, as a pure function of the
// notebook's content (so it is tested without a server).
import type * as nbformat from '@jupyterlab/nbformat';
import { h } from '../shell/dom';
import { highlightCode, renderMarkdown, renderOutput, type RenderOptions } from '../render/index';

function joined(v: nbformat.MultilineString | undefined): string {
  return Array.isArray(v) ? v.join('') : (v ?? '');
}

/** notebookLanguage is the notebook's language: its kernel spec's, else its language info's. */
export function notebookLanguage(nb: nbformat.INotebookContent): string {
  const md = nb.metadata ?? {};
  const lang = md.kernelspec?.language || md.language_info?.name;
  return typeof lang === 'string' ? lang : '';
}

function prompt(kind: 'In' | 'Out', count: nbformat.ExecutionCount | undefined): HTMLElement {
  const n = typeof count === 'number' ? String(count) : ' ';
  return h('div', { class: `nb-prompt nb-prompt-${kind.toLowerCase()}` }, `${kind} [${n}]:`);
}

/** renderNotebook is the <main> of the print view. */
export function renderNotebook(nb: nbformat.INotebookContent, opts: RenderOptions): HTMLElement {
  const language = notebookLanguage(nb);
  const main = h('main', { class: 'nb-print' });
  (nb.cells ?? []).forEach((cell, i) => main.append(renderCell(cell, i + 1, language, opts)));
  if ((nb.cells ?? []).length === 0) {
    main.append(h('p', { class: 'nb-empty' }, 'This notebook has no cells.'));
  }
  return main;
}

function renderCell(cell: nbformat.ICell, n: number, language: string, opts: RenderOptions): HTMLElement {
  const source = joined(cell.source);
  switch (cell.cell_type) {
    case 'code': {
      const c = cell as nbformat.ICodeCell;
      const el = h(
        'section',
        { class: 'nb-cell nb-code-cell', 'aria-label': `Cell ${n}` },
        h('div', { class: 'nb-input' }, prompt('In', c.execution_count), highlightCode(source, language)),
      );
      const outputs = c.outputs ?? [];
      if (outputs.length > 0) {
        const area = h('div', { class: 'nb-outputs', role: 'region', 'aria-label': `Output of cell ${n}` });
        for (const o of outputs) {
          const isResult = o.output_type === 'execute_result';
          area.append(
            h(
              'div',
              { class: 'nb-output-row' },
              isResult
                ? prompt('Out', (o as nbformat.IExecuteResult).execution_count)
                : h('div', { class: 'nb-prompt' }),
              renderOutput(o, opts),
            ),
          );
        }
        el.append(area);
      }
      return el;
    }
    case 'markdown': {
      const md = renderMarkdown(source, { ...opts, attachments: (cell as nbformat.IMarkdownCell).attachments });
      return h('section', { class: 'nb-cell nb-markdown-cell', 'aria-label': `Cell ${n}` }, md);
    }
    default:
      return h(
        'section',
        { class: 'nb-cell nb-raw-cell', 'aria-label': `Cell ${n}` },
        h('pre', { class: 'nb-raw' }, source),
      );
  }
}
