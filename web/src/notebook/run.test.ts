import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dropRunningMark, runningMark } from './run';

test('the mark of a run going on is read from metadata.nbkube.running and taken away whole', () => {
  assert.equal(runningMark({}), undefined);
  assert.equal(runningMark({ nbkube: { running: '' } }), undefined);
  assert.equal(runningMark({ nbkube: { running: 7 } }), undefined);
  assert.equal(runningMark({ nbkube: { running: 'm1' } }), 'm1');
  const md: Record<string, unknown> = { tags: ['a'], nbkube: { running: 'm1' } };
  dropRunningMark(md);
  assert.deepEqual(md, { tags: ['a'] });
  const kept: Record<string, unknown> = { nbkube: { running: 'm1', other: 1 } };
  dropRunningMark(kept);
  assert.deepEqual(kept, { nbkube: { other: 1 } });
});
