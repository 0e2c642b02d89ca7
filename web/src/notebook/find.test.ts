import { test } from 'node:test';
import assert from 'node:assert/strict';
import { joinMetadata, splitMetadata } from './cellmeta';
import { findAll, nextMatch, replaceIn } from './find';

test('find goes through the cells in order and round to the top; replace keeps the rest', () => {
  const src = ['x = 1\nX = x', 'y = x', 'nothing'];
  const all = findAll(src, 'x', false);
  assert.deepEqual(
    all.map((m) => [m.cell, m.from]),
    [
      [0, 0],
      [0, 6],
      [0, 10],
      [1, 4],
    ],
  );
  assert.equal(findAll(src, 'x', true).length, 3, 'match case');
  assert.deepEqual(nextMatch(all, 0, 7), all[2]);
  assert.deepEqual(nextMatch(all, 1, 5), all[0], 'after the last match, the first');
  assert.equal(nextMatch([], 0, 0), undefined);
  assert.equal(
    replaceIn(
      src[0],
      all.filter((m) => m.cell === 0),
      'value',
    ),
    'value = 1\nvalue = value',
  );
  assert.deepEqual(findAll(src, '', false), []);
});

test('tags are a list, the rest of the metadata is JSON', () => {
  const { tags, json } = splitMetadata({ tags: ['a', 'b'], collapsed: true });
  assert.deepEqual(tags, ['a', 'b']);
  assert.deepEqual(JSON.parse(json), { collapsed: true });
  assert.deepEqual(joinMetadata('a\nb, c\n\na', '{"collapsed": false, "tags": ["gone"]}'), {
    collapsed: false,
    tags: ['a', 'b', 'c'],
  });
  assert.deepEqual(joinMetadata('', ''), {});
  assert.throws(() => joinMetadata('', '[1]'), /JSON object/);
  assert.throws(() => joinMetadata('', '{bad'));
});
