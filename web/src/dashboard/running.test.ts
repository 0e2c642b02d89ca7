import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Session } from '@jupyterlab/services';
import { installDOM } from '../testing/dom';
import { Running, kernelState } from './running';

installDOM();

function session(id: string, path: string, state = 'idle'): Session.IModel {
  return { id, path, name: '', type: 'notebook', kernel: { id: 'k' + id, name: 'python3', execution_state: state } };
}

test('kernelState says the kernel execution state, or that there is none', () => {
  assert.equal(kernelState(session('1', 'a.ipynb', 'busy')), 'busy');
  assert.equal(kernelState({ ...session('1', 'a.ipynb'), kernel: null }), 'no kernel');
});

test('the running table: notebook links, kernel, state, Shut down; rows kept by session id', () => {
  const calls: string[] = [];
  const view = new Running((p) => '/tree/' + p, { shutdown: (id, path) => calls.push(`${id} ${path}`) });
  document.body.replaceChildren(view.element);
  assert.match(view.element.tBodies[0].textContent, /No notebooks/);
  view.update([
    session('2', 'z.ipynb'),
    session('1', 'd/a.ipynb', 'busy'),
    { ...session('3', 'console-1'), type: 'console' },
  ]);
  const rows = Array.from(view.element.querySelectorAll<HTMLTableRowElement>('tr[data-session]'));
  assert.deepEqual(
    rows.map((r) => r.dataset.path),
    ['console-1', 'd/a.ipynb', 'z.ipynb'],
  );
  assert.equal(rows[1].querySelector('a')!.getAttribute('href'), '/tree/d/a.ipynb');
  assert.equal(rows[0].querySelector('a'), null, 'only notebooks have a page to link to');
  assert.equal(rows[1].cells[1].textContent, 'python3');
  assert.equal(rows[1].cells[2].textContent, 'busy');
  const shut = rows[1].querySelector('button')!;
  assert.equal(shut.getAttribute('aria-label'), 'Shut down d/a.ipynb');
  shut.click();
  assert.deepEqual(calls, ['1 d/a.ipynb']);
  view.update([session('1', 'd/a.ipynb', 'idle')]);
  assert.equal(view.element.querySelector('tr[data-session="1"]'), rows[1], 'the same row, updated');
  assert.equal(rows[1].cells[2].textContent, 'idle');
  assert.equal(view.element.querySelectorAll('tr[data-session]').length, 1);
  view.update([]);
  assert.match(view.element.tBodies[0].textContent, /No notebooks/);
});
