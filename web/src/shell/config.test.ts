import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { fileURL, filesURL, viewKind } from './config';

installDOM();
document.head.append(
  Object.assign(document.createElement('script'), {
    id: 'nbkube-config',
    type: 'application/json',
    textContent: JSON.stringify({ baseUrl: '/u/ann/', page: 'dashboard', path: '', user: 'ann', canLogout: true }),
  }),
);

test('viewKind: images, PDF and HTML are the browser’s to show', () => {
  assert.equal(viewKind('a/pic.PNG'), 'image');
  assert.equal(viewKind('x.svg'), 'image');
  assert.equal(viewKind('paper.pdf'), 'pdf');
  assert.equal(viewKind('report.html'), 'html');
  assert.equal(viewKind('x.py'), undefined);
  assert.equal(viewKind('png'), undefined);
  assert.equal(viewKind('.png'), undefined);
  assert.equal(viewKind('x.constructor'), undefined);
});

test('fileURL: the viewer for what the browser shows, the editor for the rest', () => {
  assert.equal(fileURL('d d/pic.png'), '/u/ann/view/d%20d/pic.png');
  assert.equal(fileURL('d d/run.py'), '/u/ann/edit/d%20d/run.py');
  assert.equal(fileURL('data.bin'), '/u/ann/edit/data.bin');
  assert.equal(filesURL('a#b.txt', true), '/u/ann/files/a%23b.txt?download=1');
});
