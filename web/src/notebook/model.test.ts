import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as nbformat from '@jupyterlab/nbformat';
import { makeCell, mergeSources, NotebookModel, splitSource, type Change } from './model';

function nb(...sources: string[]): nbformat.INotebookContent {
  return {
    nbformat: 4,
    nbformat_minor: 4,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: sources.map((s, i) =>
      i % 2 === 0
        ? {
            cell_type: 'code',
            source: s.split(/(?<=\n)/),
            metadata: {},
            outputs: [{ output_type: 'stream', name: 'stdout', text: ['x\n'] }],
            execution_count: i + 1,
          }
        : { cell_type: 'markdown', source: s, metadata: {} },
    ),
  };
}

const sources = (m: NotebookModel) => m.cells.map((c) => c.source);

test('load joins sources, gives ids, and saves as nbformat 4.5 with outputs and counts', () => {
  const m = NotebookModel.fromJSON(nb('a = 1\nb = 2', '# Title'));
  assert.deepEqual(sources(m), ['a = 1\nb = 2', '# Title']);
  assert.equal(m.dirty, false);
  const out = m.toJSON();
  assert.equal(out.nbformat, 4);
  assert.equal(out.nbformat_minor, 5);
  assert.ok(out.cells.every((c) => typeof c.id === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(c.id)));
  const code = out.cells[0] as nbformat.ICodeCell;
  assert.equal(code.execution_count, 1);
  assert.equal(code.outputs.length, 1);
  assert.equal('outputs' in out.cells[1], false);
  assert.equal(out.metadata.kernelspec?.name, 'python3');
});

test('insert, move, remove and undo delete keep order and mark dirty', () => {
  const m = NotebookModel.fromJSON(nb('a', 'b', 'c'));
  const changes: Change[] = [];
  m.onChange((c) => changes.push(c));
  m.insert(1, makeCell('code', 'new'));
  assert.deepEqual(sources(m), ['a', 'new', 'b', 'c']);
  assert.equal(m.dirty, true);
  assert.equal(m.move(1, 1), 2);
  assert.deepEqual(sources(m), ['a', 'b', 'new', 'c']);
  assert.equal(m.move(0, -1), 0, 'the first cell cannot move up');
  assert.equal(m.move(3, 1), 3, 'the last cell cannot move down');
  m.remove(2);
  m.remove(0);
  assert.deepEqual(sources(m), ['b', 'c']);
  assert.equal(m.undoDelete(), 0);
  assert.deepEqual(sources(m), ['a', 'b', 'c']);
  assert.equal(m.undoDelete(), 2);
  assert.deepEqual(sources(m), ['a', 'b', 'new', 'c']);
  assert.equal(m.undoDelete(), -1);
  assert.deepEqual(
    changes.map((c) => c.kind),
    ['insert', 'move', 'remove', 'remove', 'insert', 'insert'],
  );
});

test('deleting the last cell leaves one empty code cell', () => {
  const m = NotebookModel.fromJSON(nb('a'));
  m.remove(0);
  assert.equal(m.cells.length, 1);
  assert.equal(m.cells[0].type, 'code');
  assert.equal(m.cells[0].source, '');
});

test('cut, copy and paste copy cells with new ids', () => {
  const m = NotebookModel.fromJSON(nb('a', 'b'));
  assert.equal(m.canPaste, false);
  m.copy(0);
  assert.equal(m.paste(2), 1);
  assert.deepEqual(sources(m), ['a', 'b', 'a']);
  assert.notEqual(m.cells[2].id, m.cells[0].id);
  assert.equal(m.cells[2].outputs.length, 1);
  m.cut(1);
  assert.deepEqual(sources(m), ['a', 'a']);
  m.paste(0);
  m.paste(0);
  assert.deepEqual(sources(m), ['b', 'b', 'a', 'a']);
  assert.equal(new Set(m.cells.map((c) => c.id)).size, 4);
});

test('changing a code cell to markdown drops its outputs and count', () => {
  const m = NotebookModel.fromJSON(nb('print(1)'));
  m.setType(0, 'markdown');
  const c = m.toJSON().cells[0];
  assert.equal(c.cell_type, 'markdown');
  assert.equal('outputs' in c, false);
  m.setType(0, 'raw');
  assert.equal(m.toJSON().cells[0].cell_type, 'raw');
});

test('version moves on every change; load marks clean', () => {
  const m = NotebookModel.fromJSON(nb('a'));
  const v = m.version;
  m.markChanged();
  assert.ok(m.version > v);
  assert.equal(m.dirty, true);
  m.load(nb('b'));
  assert.equal(m.dirty, false);
});

test('duplicate ids in a file are made unique', () => {
  const file = nb('a', 'b');
  file.cells[0].id = 'same';
  file.cells[1].id = 'same';
  const m = NotebookModel.fromJSON(file);
  assert.notEqual(m.cells[0].id, m.cells[1].id);
});

test('merge joins sources with a newline and drops the outputs; split cuts at offsets', () => {
  assert.equal(mergeSources(['a = 1', 'b = 2', '']), 'a = 1\nb = 2\n');
  assert.deepEqual(splitSource('a = 1\nb = 2', [6]), ['a = 1', 'b = 2']);
  assert.deepEqual(splitSource('abc', [0, 3]), ['abc']);
  assert.deepEqual(splitSource('one two three', [4, 7]), ['one ', 'two', ' three']);
  const m = new NotebookModel();
  m.load({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells: [
      {
        cell_type: 'code',
        source: 'x',
        metadata: {},
        outputs: [{ output_type: 'stream', name: 'stdout', text: '1' }],
        execution_count: 3,
      },
      { cell_type: 'code', source: 'y', metadata: {}, outputs: [], execution_count: null },
      { cell_type: 'markdown', source: '# z', metadata: {} },
    ],
  });
  m.merge(0, 3);
  assert.equal(m.cells.length, 1);
  assert.equal(m.cells[0].source, 'x\ny\n# z');
  assert.deepEqual(m.cells[0].outputs, []);
  assert.equal(m.cells[0].executionCount, null);
  assert.equal(m.canUndoDelete, false, 'merged cells are not deleted cells');
  assert.equal(m.split(0, [1, 3]), 3);
  assert.deepEqual(
    m.cells.map((c) => [c.type, c.source]),
    [
      ['code', 'x'],
      ['code', 'y'],
      ['code', '# z'],
    ],
  );
});

test('several cells move, delete and come back together', () => {
  const m = new NotebookModel();
  m.load({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells: ['a', 'b', 'c', 'd'].map((s) => ({
      cell_type: 'code',
      source: s,
      metadata: {},
      outputs: [],
      execution_count: null,
    })),
  });
  const src = () => m.cells.map((c) => c.source).join('');
  assert.equal(m.move(1, 1, 2), 2);
  assert.equal(src(), 'adbc');
  assert.equal(m.move(2, -1, 2), 1);
  assert.equal(src(), 'abcd');
  assert.equal(m.move(0, -1, 2), 0, 'the first cells cannot move up');
  assert.equal(m.move(2, 1, 2), 2, 'the last cells cannot move down');
  m.remove(1, 2);
  assert.equal(src(), 'ad');
  assert.equal(m.undoDelete(), 1);
  assert.equal(src(), 'abcd');
});

test('changes made quietly (a followed run the file gets elsewhere) leave the notebook saved', () => {
  const m = NotebookModel.fromJSON({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] });
  assert.equal(m.dirty, false);
  m.quietly(() => m.markChanged());
  assert.equal(m.dirty, false);
  m.markChanged();
  assert.equal(m.dirty, true);
});
