import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DirtyTracker } from './dirty';

test('dirty after a change, clean after a save of the latest version or a load', () => {
  const d = new DirtyTracker();
  const seen: boolean[] = [];
  d.onChange((x) => seen.push(x));
  assert.equal(d.dirty, false);
  d.changed();
  d.changed();
  assert.equal(d.dirty, true);
  d.saved(d.current());
  assert.equal(d.dirty, false);
  d.changed();
  d.loaded();
  assert.equal(d.dirty, false);
  // Only changes of the state are told.
  assert.deepEqual(seen, [true, false, true, false]);
});

test('typing while a save runs keeps the page dirty', () => {
  const d = new DirtyTracker();
  d.changed();
  const writing = d.current();
  d.changed(); // typed after the save started
  d.saved(writing);
  assert.equal(d.dirty, true);
  // A save that ends after a later one does not make the page older.
  const later = d.current();
  d.saved(later);
  d.saved(writing);
  assert.equal(d.dirty, false);
});
