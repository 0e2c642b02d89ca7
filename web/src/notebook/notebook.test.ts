import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import type { Services } from '../shell/server';

installDOM();

// The page's controller without a server: the model is loaded directly and only commands
// that need no kernel or contents are used (no request is made).
const { NotebookPage } = await import('./notebook');

function page(...cells: [string, string][]) {
  const p = new NotebookPage({} as Services, 'dir/nb.ipynb');
  document.body.replaceChildren(p.toolbar.node, p.cellsNode);
  p.model.load({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells: cells.map(([t, s]) => ({
      cell_type: t,
      source: s,
      metadata: {},
      ...(t === 'code' ? { outputs: [], execution_count: null } : {}),
    })),
  });
  p.select(0, false);
  return p;
}

const shown = (p: InstanceType<typeof NotebookPage>) =>
  [...p.cellsNode.querySelectorAll<HTMLElement>('.nb-cell')].map((c) => `${c.dataset.cellIndex}:${c.dataset.cellType}`);
const selected = (p: InstanceType<typeof NotebookPage>) =>
  p.cellsNode.querySelector<HTMLElement>('.nb-selected')?.dataset.cellIndex;

test('cells are shown with their index, type, labels and output regions', () => {
  const p = page(['markdown', '# T'], ['code', 'x = 1'], ['raw', 'r']);
  assert.deepEqual(shown(p), ['0:markdown', '1:code', '2:raw']);
  const code = p.cellsNode.querySelector('[data-cell-index="1"]')!;
  assert.equal(code.getAttribute('aria-label'), 'Cell 2, code');
  const out = code.querySelector('.nb-outputs')!;
  assert.equal(out.getAttribute('role'), 'region');
  assert.equal(out.getAttribute('aria-label'), 'Output of cell 2');
  assert.equal(code.querySelector('.nb-prompt')!.textContent, '[ ]:');
  assert.equal(selected(p), '0');
});

test('command mode: insert, delete, undo, move, copy and paste keep indices in step', () => {
  const p = page(['code', 'a'], ['code', 'b']);
  assert.equal(p.mode(), 'command');
  p.command('insert-below');
  assert.deepEqual(shown(p), ['0:code', '1:code', '2:code']);
  assert.equal(selected(p), '1');
  p.command('insert-above');
  assert.equal(selected(p), '1');
  assert.equal(p.model.cells.length, 4);
  p.command('delete');
  p.command('delete');
  assert.deepEqual(
    p.model.cells.map((c) => c.source),
    ['a', 'b'],
  );
  p.command('undo-delete');
  assert.equal(p.model.cells.length, 3);
  // The restored cell is the one selected, and the only one.
  assert.equal(p.cellsNode.querySelectorAll('.nb-selected').length, 1);
  p.select(0, false);
  p.command('move-down');
  assert.deepEqual(p.model.cells.map((c) => c.source)[1], 'a');
  assert.equal(selected(p), '1');
  p.command('copy');
  p.command('paste');
  assert.deepEqual(p.model.cells.map((c) => c.source).filter((s) => s === 'a').length, 2);
  assert.equal(selected(p), '2');
  // The DOM follows the model, in order.
  const texts = [...p.cellsNode.querySelectorAll('.nb-cell')].map((c) => c.querySelector('.nb-input')!.textContent);
  assert.deepEqual(
    texts,
    p.model.cells.map((c) => c.source),
  );
  assert.deepEqual(
    shown(p).map((s) => s.split(':')[0]),
    p.model.cells.map((_, i) => String(i)),
  );
  assert.equal(document.body.dataset.dirty, 'true');
});

test('changing the type redraws the cell and the toolbar select follows the selection', () => {
  const p = page(['code', 'print(1)'], ['code', 'b']);
  p.command('to-markdown');
  assert.deepEqual(shown(p), ['0:markdown', '1:code']);
  assert.equal(p.cellsNode.querySelector('[data-cell-index="0"] .nb-outputs'), null);
  const select = p.toolbar.node.querySelector('select') as HTMLSelectElement;
  assert.equal(select.value, 'markdown');
  p.command('select-next');
  assert.equal(select.value, 'code');
  p.command('select-prev');
  p.command('to-raw');
  assert.deepEqual(shown(p), ['0:raw', '1:code']);
});

test('selection stops at the ends; deleting the last cell leaves one', () => {
  const p = page(['code', 'only']);
  p.command('select-prev');
  p.command('select-next');
  assert.equal(selected(p), '0');
  p.command('delete');
  assert.deepEqual(shown(p), ['0:code']);
  assert.equal(selected(p), '0');
});

test("mode: keys are the notebook's on a cell or an output box, not in inputs or the toolbar", () => {
  const p = page(['code', 'a']);
  const out = p.cellsNode.querySelector('.nb-outputs') as HTMLElement;
  const box = document.createElement('pre');
  box.tabIndex = 0;
  const input = document.createElement('input');
  out.append(box, input);
  box.focus();
  assert.equal(p.mode(), 'command');
  input.focus();
  assert.equal(p.mode(), 'other');
  (p.toolbar.node.querySelector('button') as HTMLElement).focus();
  assert.equal(p.mode(), 'other');
  (p.cellsNode.querySelector('.nb-cell') as HTMLElement).focus();
  assert.equal(p.mode(), 'command');
});
