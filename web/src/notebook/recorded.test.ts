import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as nbformat from '@jupyterlab/nbformat';
import { NotebookModel } from './model';
import { recordedRuns, sameJSON } from './recorded';

const stream = (text: string): nbformat.IOutput => ({ output_type: 'stream', name: 'stdout', text });

function code(
  id: string,
  source: string,
  outputs: nbformat.IOutput[],
  count: number | null,
  md = {},
): nbformat.ICodeCell {
  return { cell_type: 'code', id, source, metadata: md, outputs, execution_count: count };
}

function notebook(...cells: nbformat.ICell[]): nbformat.INotebookContent {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells,
  };
}

const base = notebook(code('a', 'long()', [stream('old\n')], 1), code('b', 'x = 1', [], 2), {
  cell_type: 'markdown',
  id: 'm',
  source: '# notes',
  metadata: {},
});

test('sameJSON compares values, not key order', () => {
  assert.ok(sameJSON({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }));
  assert.ok(!sameJSON({ a: 1 }, { a: 1, b: 2 }));
  assert.ok(!sameJSON([1, 2], [2, 1]));
  assert.ok(sameJSON({ a: undefined, b: 1 }, { b: 1 }));
});

test('a run the page saw part of is replaced by the whole run the server wrote', () => {
  const page = NotebookModel.fromJSON(base);
  // The page ran cell a; its connection dropped after the first line, before the reply.
  page.cells[0].outputs = [stream('first\n')];
  page.cells[0].executionCount = null;
  const server = notebook(
    code('a', ['long', '()'].join(''), [stream('first\nsecond\n')], 3, { execution: { 'iopub.status.idle': 't' } }),
    code('b', ['x = 1'].join(''), [], 2),
    { cell_type: 'markdown', id: 'm', source: ['# notes'], metadata: {} },
  );
  const runs = recordedRuns(base, server, page.cells);
  assert.deepEqual(runs, [
    { index: 0, outputs: [stream('first\nsecond\n')], executionCount: 3, execution: { 'iopub.status.idle': 't' } },
  ]);
});

test('a cell run again here, or edited here since, keeps what the page has', () => {
  const server = notebook(code('a', 'long()', [stream('server\n')], 3), code('b', 'x = 1', [], 2), base.cells[2]);
  const rerun = NotebookModel.fromJSON(base);
  rerun.cells[0].outputs = [stream('newer\n')];
  rerun.cells[0].executionCount = 4;
  assert.deepEqual(recordedRuns(base, server, rerun.cells), []);
  const edited = NotebookModel.fromJSON(base);
  edited.cells[0].source = 'long(2)';
  assert.deepEqual(recordedRuns(base, server, edited.cells), []);
  // The page has the server's run already (its client came back for the replay).
  const same = NotebookModel.fromJSON(base);
  same.cells[0].outputs = [stream('server\n')];
  same.cells[0].executionCount = 3;
  assert.deepEqual(recordedRuns(base, server, same.cells), []);
});

test('a copy changed in more than runs is the user’s to decide', () => {
  const page = NotebookModel.fromJSON(base);
  for (const server of [
    notebook(code('a', 'long()', [stream('x\n')], 3), code('b', 'x = 2', [], 2), base.cells[2]),
    notebook(code('a', 'long()', [stream('x\n')], 3), base.cells[2]),
    { ...notebook(...base.cells), metadata: { other: true } },
  ]) {
    assert.equal(recordedRuns(base, server, page.cells), null);
  }
});

test('the mark of a run going on is written by runs, not a change of the notebook', () => {
  const page = NotebookModel.fromJSON(base);
  const mid = code('a', 'long()', [stream('first\n')], 3, { nbkube: { running: 'm1' } });
  const server = notebook(mid, code('b', 'x = 1', [], 2), base.cells[2]);
  assert.deepEqual(recordedRuns(base, server, page.cells), [
    { index: 0, outputs: [stream('first\n')], executionCount: 3, execution: undefined },
  ]);
  // The mark went with the run's last write while the page had it.
  const marked = notebook(
    code('a', 'long()', [stream('old\n')], 1, { nbkube: { running: 'm1' } }),
    ...base.cells.slice(1),
  );
  const ended = notebook(code('a', 'long()', [stream('all\n')], 3), ...base.cells.slice(1));
  assert.equal(recordedRuns(marked, ended, NotebookModel.fromJSON(marked).cells)?.length, 1);
  // Other keys of nbkube's own are the notebook's.
  const other = notebook(
    code('a', 'long()', [stream('x\n')], 3, { nbkube: { running: 'm1', pinned: true } }),
    ...base.cells.slice(1),
  );
  assert.equal(recordedRuns(base, other, page.cells), null);
});
