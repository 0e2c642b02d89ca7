import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import type { Services } from '../shell/server';
import type * as nbformat from '@jupyterlab/nbformat';

installDOM();

// A file of its own: the editor module must not have been loaded by another test yet.
const { NotebookPage } = await import('./notebook');
const { isNew } = await import('./model');
const { editorModule, loadEditor } = await import('./editorloader');

const code = (source: string, outputs: nbformat.IOutput[] = []): nbformat.ICodeCell => ({
  cell_type: 'code',
  source,
  metadata: {},
  outputs,
  execution_count: null,
});

test('a notebook is new when it has no cell, or one empty cell without outputs', () => {
  const nb = (cells: nbformat.ICell[]): nbformat.INotebookContent => ({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells,
  });
  assert.equal(isNew(nb([])), true);
  assert.equal(isNew(nb([code('')])), true);
  assert.equal(isNew(nb([code('x')])), false);
  assert.equal(isNew(nb([code('', [{ output_type: 'stream', name: 'stdout', text: 'x' }])])), false);
  assert.equal(isNew(nb([code(''), code('')])), false);
});

test('typing before the editor arrives goes into the cell, in edit mode, and on into the editor', async () => {
  assert.equal(editorModule(), null, 'the editor module is loaded already: this test needs a file of its own');
  const p = new NotebookPage({} as Services, 'nb.ipynb');
  document.body.replaceChildren(p.toolbar.node, p.cellsNode);
  p.model.load({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
  p.select(0, true);
  const box = p.cellsNode.querySelector<HTMLTextAreaElement>('.nb-editor-fallback');
  assert.ok(box, 'no text box stands in for the editor');
  assert.equal(document.activeElement, box);
  // Keys typed here are the cell's, not commands ("r" would make the cell raw).
  assert.equal(p.mode(), 'edit');
  box.value = 'print(42)';
  box.setSelectionRange(5, 5);
  box.dispatchEvent(new window.Event('input'));
  assert.equal(p.model.cells[0].source, 'print(42)');
  assert.equal(p.model.dirty, true);

  await loadEditor();
  await new Promise((r) => setTimeout(r, 0));
  const v = p.cellsNode.querySelector('.nb-cell');
  assert.equal(v?.querySelector('.nb-editor-fallback'), null, 'the text box stays after the editor arrived');
  assert.ok(v?.querySelector('.cm-editor'), 'no editor after the module arrived');
  assert.equal(v?.querySelector('.cm-content')?.textContent, 'print(42)');
  assert.equal(p.mode(), 'edit');
  assert.equal(p.model.cells[0].type, 'code');
});

test('Download as: each format of /nbconvert, chosen from a select that goes back to its prompt', async () => {
  const { Toolbar, DOWNLOADS } = await import('./toolbar');
  const asked: string[] = [];
  const bar = new Toolbar(
    () => {},
    () => {},
    (f) => asked.push(f),
  );
  const select = bar.node.querySelector<HTMLSelectElement>('select[aria-label="Download as"]');
  assert.ok(select, 'no Download as select');
  assert.deepEqual(
    [...select.options].slice(1).map((o) => o.value),
    ['notebook', 'script', 'html', 'markdown', 'rst', 'latex', 'asciidoc'],
  );
  assert.equal(DOWNLOADS.length, 7);
  select.value = 'html';
  select.dispatchEvent(new window.Event('change'));
  assert.deepEqual(asked, ['html']);
  assert.equal(select.value, '');
});
