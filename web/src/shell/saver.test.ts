import { test } from 'node:test';
import assert from 'node:assert/strict';
import { basename, dirname, isNewer, saveVerdict } from './saver';

test('saveVerdict: a changed file is a conflict to ask about; other errors fail', () => {
  assert.equal(saveVerdict(200), 'saved');
  assert.equal(saveVerdict(201), 'saved');
  assert.equal(saveVerdict(409, 'changed on disk'), 'conflict');
  assert.equal(saveVerdict(412), 'conflict');
  // A conflict of another kind (e.g. a directory there) is no question of overwriting.
  assert.equal(saveVerdict(409, 'is a directory'), 'failed');
  assert.equal(saveVerdict(409), 'failed');
  assert.equal(saveVerdict(403), 'failed');
  assert.equal(saveVerdict(500), 'failed');
});

test('paths and times', () => {
  assert.equal(basename('a/b/c.txt'), 'c.txt');
  assert.equal(dirname('a/b/c.txt'), 'a/b');
  assert.equal(dirname('c.txt'), '');
  assert.equal(isNewer('2026-01-01T00:00:02Z', '2026-01-01T00:00:00Z'), true);
});
