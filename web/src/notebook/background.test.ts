import { test } from 'node:test';
import assert from 'node:assert/strict';
import { msgIdOf, sourceHash } from './background';

test('a source hash is MurmurHash2 of the UTF-8 bytes, as the server checks it', () => {
  // jupyter-server-documents' example, and values of nbkube's Go SourceHash.
  assert.equal(sourceHash('1 + 1'), '3531899427');
  assert.equal(sourceHash(''), '0');
  assert.equal(sourceHash("print('héllo wörld ✓')"), '1686570399');
});

test('a cell of a named request is followed by the msg_id the agent gives it', () => {
  assert.equal(msgIdOf('r1', 'c1'), 'r1:c1');
});
