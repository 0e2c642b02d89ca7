import { test } from 'node:test';
import assert from 'node:assert/strict';
import { badName, baseName, breadcrumbs, isNotebook, joinPath, parentDir, stemLength } from './paths';

test('joinPath joins without doubled or leading slashes', () => {
  assert.equal(joinPath('', 'a.ipynb'), 'a.ipynb');
  assert.equal(joinPath('x/y', 'a.ipynb'), 'x/y/a.ipynb');
  assert.equal(joinPath('x/y/', '/a'), 'x/y/a');
  assert.equal(joinPath('', ''), '');
});

test('parentDir and baseName split a path', () => {
  assert.equal(parentDir('a.ipynb'), '');
  assert.equal(parentDir('x/y/a.ipynb'), 'x/y');
  assert.equal(parentDir(''), '');
  assert.equal(baseName('x/y/a.ipynb'), 'a.ipynb');
  assert.equal(baseName('a'), 'a');
  assert.equal(baseName(''), '');
});

test('breadcrumbs go from the root down to the directory', () => {
  assert.deepEqual(breadcrumbs(''), [{ name: 'Home', path: '' }]);
  assert.deepEqual(breadcrumbs('x/y z/w'), [
    { name: 'Home', path: '' },
    { name: 'x', path: 'x' },
    { name: 'y z', path: 'x/y z' },
    { name: 'w', path: 'x/y z/w' },
  ]);
});

test('isNotebook and stemLength', () => {
  assert.ok(isNotebook('a.ipynb'));
  assert.ok(isNotebook('A.IPYNB'));
  assert.ok(!isNotebook('a.ipynb.txt'));
  assert.equal(stemLength('data.tar.gz'), 'data.tar'.length);
  assert.equal(stemLength('.bashrc'), '.bashrc'.length);
  assert.equal(stemLength('v1.0', true), 4);
});

test('badName refuses empty names, slashes, . and ..', () => {
  assert.equal(badName('ok.txt'), '');
  assert.notEqual(badName('  '), '');
  assert.notEqual(badName('a/b'), '');
  assert.notEqual(badName('..'), '');
});
