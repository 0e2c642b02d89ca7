import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DateFormatter, formatSize, sortEntries, type SortableEntry } from './format';

test('formatSize uses binary units with one decimal below 10', () => {
  assert.equal(formatSize(0), '0 B');
  assert.equal(formatSize(1023), '1023 B');
  assert.equal(formatSize(1024), '1.0 KiB');
  assert.equal(formatSize(1536), '1.5 KiB');
  assert.equal(formatSize(10 * 1024), '10 KiB');
  assert.equal(formatSize(1024 * 1024 - 1), '1.0 MiB');
  assert.equal(formatSize(5.25 * 1024 * 1024 * 1024), '5.3 GiB');
  assert.equal(formatSize(undefined), '');
  assert.equal(formatSize(null), '');
  assert.equal(formatSize(-1), '');
});

test('DateFormatter formats ISO dates and leaves bad ones empty', () => {
  const f = new DateFormatter('en-GB', 'UTC');
  assert.equal(f.format('2026-03-04T05:06:07Z'), '4 Mar 2026, 05:06');
  assert.equal(f.format(''), '');
  assert.equal(f.format('yesterday'), '');
  assert.equal(f.format(null), '');
});

const entries: SortableEntry[] = [
  { name: 'nb10.ipynb', type: 'notebook', last_modified: '2026-01-03T00:00:00Z', size: 10 },
  { name: 'nb2.ipynb', type: 'notebook', last_modified: '2026-01-01T00:00:00Z', size: 300 },
  { name: 'zdir', type: 'directory', last_modified: '2026-01-05T00:00:00Z', size: null },
  { name: 'Adir', type: 'directory', last_modified: '2026-01-02T00:00:00Z', size: null },
  { name: 'b.txt', type: 'file', last_modified: '2026-01-04T00:00:00Z', size: 20 },
];
const names = (es: SortableEntry[]) => es.map((e) => e.name);

test('sortEntries: directories first, names in natural order', () => {
  assert.deepEqual(names(sortEntries(entries, { key: 'name', ascending: true })), [
    'Adir',
    'zdir',
    'b.txt',
    'nb2.ipynb',
    'nb10.ipynb',
  ]);
  assert.deepEqual(names(sortEntries(entries, { key: 'name', ascending: false })), [
    'zdir',
    'Adir',
    'nb10.ipynb',
    'nb2.ipynb',
    'b.txt',
  ]);
});

test('sortEntries by date and size keeps directories first', () => {
  assert.deepEqual(names(sortEntries(entries, { key: 'last_modified', ascending: false })), [
    'zdir',
    'Adir',
    'b.txt',
    'nb10.ipynb',
    'nb2.ipynb',
  ]);
  assert.deepEqual(names(sortEntries(entries, { key: 'size', ascending: true })), [
    'Adir',
    'zdir',
    'nb10.ipynb',
    'b.txt',
    'nb2.ipynb',
  ]);
});

test('sortEntries does not change its argument', () => {
  const before = names(entries);
  sortEntries(entries, { key: 'size', ascending: false });
  assert.deepEqual(names(entries), before);
});
