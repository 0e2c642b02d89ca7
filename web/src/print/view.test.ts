import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as nbformat from '@jupyterlab/nbformat';
import { installDOM } from '../testing/dom';
import { notebookLanguage, renderNotebook } from './view';

installDOM();

const nb = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
  cells: [
    {
      cell_type: 'markdown',
      id: 'a',
      metadata: {},
      source: ['# Title\n', '\n', 'Math $e^{i\\pi}$ ![pic](attachment:p.png)'],
      attachments: { 'p.png': { 'image/png': 'iVBORw0KGgo=' } },
    },
    {
      cell_type: 'code',
      id: 'b',
      metadata: {},
      execution_count: 3,
      source: 'import sys\nprint("hi")\n1 + 1',
      outputs: [
        { output_type: 'stream', name: 'stdout', text: ['hi\n'] },
        { output_type: 'execute_result', execution_count: 3, data: { 'text/plain': '2' }, metadata: {} },
      ],
    },
    { cell_type: 'code', id: 'c', metadata: {}, execution_count: null, source: 'x = 1', outputs: [] },
    { cell_type: 'raw', id: 'd', metadata: {}, source: '<b>raw</b>' },
  ],
} as unknown as nbformat.INotebookContent;

test('every cell is rendered, in order, with prompts', () => {
  const main = renderNotebook(nb, { trusted: false });
  assert.equal(main.tagName, 'MAIN');
  const cells = main.querySelectorAll('.nb-cell');
  assert.equal(cells.length, 4);
  assert.equal(cells[0].querySelector('h1')?.textContent, 'Title');
  assert.ok(cells[0].querySelector('.katex'));
  assert.equal(cells[0].querySelector('img')?.getAttribute('src'), 'data:image/png;base64,iVBORw0KGgo=');

  assert.equal(cells[1].querySelector('.nb-prompt-in')?.textContent, 'In [3]:');
  assert.equal(cells[1].querySelector('pre.nb-code code')?.textContent, 'import sys\nprint("hi")\n1 + 1');
  assert.ok(cells[1].querySelector('pre.nb-code .tok-keyword'));
  const region = cells[1].querySelector('[role=region]')!;
  assert.equal(region.getAttribute('aria-label'), 'Output of cell 2');
  const rows = region.querySelectorAll('.nb-output-row');
  assert.equal(rows.length, 2);
  assert.equal(rows[0].querySelector('.nb-stream')?.textContent, 'hi\n');
  assert.equal(rows[0].querySelector('.nb-prompt')?.textContent, '');
  assert.equal(rows[1].querySelector('.nb-prompt-out')?.textContent, 'Out [3]:');
  assert.equal(rows[1].querySelector('.nb-output')?.textContent, '2');

  assert.equal(cells[2].querySelector('.nb-prompt-in')?.textContent, 'In [ ]:');
  assert.equal(cells[2].querySelector('[role=region]'), null);

  assert.equal(cells[3].querySelector('pre.nb-raw')?.textContent, '<b>raw</b>');
  assert.equal(cells[3].querySelector('b'), null);
});

test('the language comes from the kernel spec, else the language info', () => {
  assert.equal(notebookLanguage(nb), 'python');
  assert.equal(notebookLanguage({ ...nb, metadata: { language_info: { name: 'R' } } }), 'R');
  assert.equal(notebookLanguage({ ...nb, metadata: {} }), '');
  const r = renderNotebook({ ...nb, metadata: { language_info: { name: 'R' } } }, { trusted: false });
  assert.equal(r.querySelector('pre.nb-code .tok-keyword'), null);
});

test('an empty notebook says so', () => {
  assert.match(renderNotebook({ ...nb, cells: [] }, { trusted: false }).textContent ?? '', /no cells/);
});
