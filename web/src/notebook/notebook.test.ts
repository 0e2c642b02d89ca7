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

const sources = (p: InstanceType<typeof NotebookPage>) => p.model.cells.map((c) => c.source);
const marked = (p: InstanceType<typeof NotebookPage>) =>
  [...p.cellsNode.querySelectorAll<HTMLElement>('.nb-marked')].map((c) => c.dataset.cellIndex);

test('Shift-Down selects several cells; they are copied, moved, deleted and undone together', () => {
  const p = page(['code', 'a'], ['code', 'b'], ['code', 'c'], ['code', 'd']);
  p.command('extend-down');
  assert.deepEqual(marked(p), ['0', '1']);
  assert.equal(selected(p), '1', 'the cursor cell moves with the selection');
  p.command('move-down');
  assert.deepEqual(sources(p), ['c', 'a', 'b', 'd']);
  assert.deepEqual(marked(p), ['1', '2']);
  p.command('copy');
  p.command('delete');
  assert.deepEqual(sources(p), ['c', 'd']);
  assert.deepEqual(marked(p), [], 'one cell is selected after a delete');
  p.command('undo-delete');
  assert.deepEqual(sources(p), ['c', 'a', 'b', 'd'], 'undo brings back every deleted cell');
  p.select(3, false);
  p.command('paste');
  assert.deepEqual(sources(p), ['c', 'a', 'b', 'd', 'a', 'b']);
  p.command('extend-up');
  p.command('extend-up');
  assert.deepEqual(marked(p), ['2', '3', '4']);
  p.command('select-next');
  assert.deepEqual(marked(p), [], 'moving without Shift selects one cell');
  assert.equal(selected(p), '3', 'from the cursor cell');
});

test('Shift-M merges the selected cells, or the cell with the one below', () => {
  const p = page(['code', 'a'], ['code', 'b'], ['markdown', 'c'], ['code', 'd']);
  p.command('merge');
  assert.deepEqual(sources(p), ['a\nb', 'c', 'd']);
  p.select(1, false);
  p.command('extend-down');
  p.command('merge');
  assert.deepEqual(sources(p), ['a\nb', 'c\nd']);
  assert.equal(p.model.cells[1].type, 'markdown', 'the first cell keeps its type');
  assert.equal(selected(p), '1');
  assert.equal(p.command('merge'), false, 'the last cell has nothing below to merge with');
});

test('clear output clears the selected cells or all; L and Shift-L toggle line numbers', () => {
  const p = page(['code', 'a'], ['code', 'b']);
  for (const c of p.model.cells) {
    c.outputs.push({ output_type: 'stream', name: 'stdout', text: 'out' });
    c.executionCount = 1;
  }
  p.model.load(p.model.toJSON());
  p.select(0, false);
  p.command('clear-output');
  assert.deepEqual(
    p.model.cells.map((c) => [c.outputs.length, c.executionCount]),
    [
      [0, null],
      [1, 1],
    ],
  );
  p.command('clear-all-output');
  assert.deepEqual(
    p.model.cells.map((c) => c.outputs.length),
    [0, 0],
  );
  p.command('line-numbers');
  assert.deepEqual(
    p.views.map((v) => v.lineNumbers),
    [true, false],
  );
  p.command('all-line-numbers');
  assert.deepEqual(
    p.views.map((v) => v.lineNumbers),
    [true, true],
  );
  p.command('all-line-numbers');
  assert.deepEqual(
    p.views.map((v) => v.lineNumbers),
    [false, false],
  );
});

test('Shift-click extends the selection from where it began', () => {
  const p = page(['markdown', 'a'], ['markdown', 'b'], ['markdown', 'c']);
  const cell = (i: number) => p.cellsNode.querySelector(`[data-cell-index="${i}"]`)!;
  cell(2).dispatchEvent(new window.MouseEvent('mousedown', { bubbles: true, shiftKey: true }));
  assert.deepEqual(marked(p), ['0', '1', '2']);
  assert.equal(selected(p), '2');
  cell(1).dispatchEvent(new window.MouseEvent('mousedown', { bubbles: true }));
  assert.deepEqual(marked(p), []);
  assert.equal(selected(p), '1');
});
