import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { Listing, type Entry, type ListingActions } from './listing';

installDOM();

const links = {
  dir: (p: string) => '/tree/' + p,
  notebook: (p: string) => '/tree/' + p,
  file: (p: string) => '/files/' + p,
  download: (p: string) => '/files/' + p + '?download=1',
};

function entry(name: string, type = 'notebook', size = 100, modified = '2026-01-01T00:00:00Z'): Entry {
  return { name, path: 'd/' + name, type, size, last_modified: modified };
}

function make(actions: Partial<ListingActions> = {}) {
  const calls: string[] = [];
  const listing = new Listing('d', links, {
    rename: (p, n) => {
      calls.push(`rename ${p} ${n}`);
      return Promise.resolve('d/' + n);
    },
    copy: (p) => calls.push(`copy ${p}`),
    delete: (p) => calls.push(`delete ${p}`),
    ...actions,
  });
  document.body.replaceChildren(listing.element);
  return { listing, calls };
}

test('rows: a real table with column headers, links by type, hooks and accessible buttons', () => {
  const { listing } = make();
  listing.update([entry('a.ipynb'), entry('sub', 'directory'), entry('x.csv', 'file', 2048)]);
  const t = listing.element;
  assert.ok(t.querySelector('caption')?.textContent);
  assert.deepEqual(
    Array.from(t.querySelectorAll('thead th'), (th) => [th.getAttribute('scope'), th.textContent]),
    [
      ['col', 'Name'],
      ['col', 'Last modified'],
      ['col', 'Size'],
      ['col', 'Actions'],
    ],
  );
  assert.deepEqual(listing.paths(), ['d/sub', 'd/a.ipynb', 'd/x.csv']);
  const row = (p: string) => t.querySelector<HTMLTableRowElement>(`tr[data-path="${p}"]`)!;
  assert.equal(row('d/sub').dataset.type, 'directory');
  assert.equal(row('d/sub').querySelector('a')!.getAttribute('href'), '/tree/d/sub');
  assert.equal(row('d/a.ipynb').querySelector('a')!.getAttribute('href'), '/tree/d/a.ipynb');
  assert.equal(row('d/a.ipynb').querySelector('a')!.getAttribute('target'), '_blank');
  assert.equal(row('d/sub').querySelector('a')!.hasAttribute('target'), false);
  const file = row('d/x.csv').querySelector('a')!;
  assert.equal(file.getAttribute('href'), '/files/d/x.csv');
  assert.equal(file.getAttribute('target'), '_blank');
  assert.equal(row('d/x.csv').cells[2].textContent, '2.0 KiB');
  assert.equal(row('d/sub').cells[2].textContent, '');
  const labels = Array.from(row('d/a.ipynb').querySelectorAll('button:not([hidden])'), (b) =>
    b.getAttribute('aria-label'),
  );
  assert.deepEqual(labels, ['Rename a.ipynb', 'Copy a.ipynb', 'Delete a.ipynb']);
  // Directories cannot be copied by the API: no Copy button for them.
  assert.equal(row('d/sub').querySelector<HTMLButtonElement>('button[data-action=copy]')!.hidden, true);
  // Every file and notebook downloads as an attachment; a directory has nothing to download.
  const download = (p: string) => row(p).querySelector<HTMLAnchorElement>('a.nb-download')!;
  assert.equal(download('d/x.csv').getAttribute('href'), '/files/d/x.csv?download=1');
  assert.equal(download('d/x.csv').getAttribute('aria-label'), 'Download x.csv');
  assert.ok(download('d/x.csv').hasAttribute('download'));
  assert.equal(download('d/a.ipynb').getAttribute('href'), '/files/d/a.ipynb?download=1');
  assert.equal(download('d/sub').hidden, true);
  assert.equal(download('d/sub').hasAttribute('href'), false);
});

test('update keeps rows, touches only changes, and adds and removes rows in place', () => {
  const { listing } = make();
  listing.update([entry('a.ipynb'), entry('b.ipynb'), entry('c.ipynb')]);
  const before = listing.row('d/b.ipynb')!;
  const link = before.querySelector('a')!;
  link.focus();
  assert.equal(document.activeElement, link);
  listing.update([entry('a0.ipynb'), entry('b.ipynb', 'notebook', 5000), entry('c.ipynb')]);
  assert.equal(listing.row('d/b.ipynb'), before, 'the same row node');
  assert.equal(before.cells[2].textContent, '4.9 KiB');
  assert.equal(document.activeElement, link, 'the focus stays');
  assert.deepEqual(listing.paths(), ['d/a0.ipynb', 'd/b.ipynb', 'd/c.ipynb']);
  assert.equal(listing.row('d/a.ipynb'), undefined);
  listing.update([]);
  assert.deepEqual(listing.paths(), []);
  assert.match(listing.element.tBodies[0].textContent, /empty/);
  listing.update([entry('z.ipynb')]);
  assert.deepEqual(listing.paths(), ['d/z.ipynb']);
});

test('row buttons call the actions with the row path', () => {
  const { listing, calls } = make();
  listing.update([entry('a.ipynb')]);
  listing.row('d/a.ipynb')!.querySelector<HTMLButtonElement>('button[data-action=copy]')!.click();
  listing.row('d/a.ipynb')!.querySelector<HTMLButtonElement>('button[data-action=delete]')!.click();
  assert.deepEqual(calls, ['copy d/a.ipynb', 'delete d/a.ipynb']);
});

test('sorting by a header toggles the order and sets aria-sort', () => {
  const { listing } = make();
  listing.update([entry('b.ipynb', 'notebook', 1), entry('a.ipynb', 'notebook', 2)]);
  const sizeButton = listing.element.querySelector<HTMLButtonElement>('button[data-sort=size]')!;
  assert.equal(listing.element.querySelector('th[aria-sort]')!.textContent, 'Name');
  // Sizes and dates sort largest and newest first, then the other way.
  sizeButton.click();
  assert.equal(sizeButton.parentElement!.getAttribute('aria-sort'), 'descending');
  assert.deepEqual(listing.paths(), ['d/a.ipynb', 'd/b.ipynb']);
  sizeButton.click();
  assert.equal(sizeButton.parentElement!.getAttribute('aria-sort'), 'ascending');
  assert.deepEqual(listing.paths(), ['d/b.ipynb', 'd/a.ipynb']);
  assert.equal(listing.element.querySelector('th[aria-sort]')!.textContent, 'Size');
});

test('an inline rename survives polling, commits on Enter and re-keys the row', async () => {
  const { listing, calls } = make();
  listing.update([entry('a.ipynb'), entry('b.ipynb')]);
  const row = listing.row('d/a.ipynb')!;
  row.querySelector<HTMLButtonElement>('button[data-action=rename]')!.click();
  const input = row.querySelector<HTMLInputElement>('input.nb-rename')!;
  assert.equal(input.getAttribute('aria-label'), 'New name for a.ipynb');
  assert.equal(document.activeElement, input);
  assert.equal(input.selectionEnd, 1, 'the name without its extension is selected');
  input.value = 'renamed.ipynb';
  // A poll comes back while the user types: the field and its text stay.
  listing.update([entry('a.ipynb', 'notebook', 999), entry('b.ipynb')]);
  assert.equal(row.querySelector('input.nb-rename'), input);
  assert.equal(input.value, 'renamed.ipynb');
  assert.equal(document.activeElement, input);
  input.dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(calls, ['rename d/a.ipynb renamed.ipynb']);
  assert.equal(row.querySelector('input.nb-rename'), null);
  assert.equal(row.dataset.path, 'd/renamed.ipynb');
  assert.equal(listing.row('d/renamed.ipynb'), row);
  assert.equal(row.querySelector('a')!.textContent, 'renamed.ipynb');
  assert.equal(row.querySelector('button[data-action=delete]')!.getAttribute('aria-label'), 'Delete renamed.ipynb');
  assert.equal(document.activeElement, row.querySelector('a'));
  // The next poll shows the new name: the same row.
  listing.update([entry('renamed.ipynb'), entry('b.ipynb')]);
  assert.equal(listing.row('d/renamed.ipynb'), row);
  assert.deepEqual(listing.paths(), ['d/b.ipynb', 'd/renamed.ipynb']);
});

test('Escape gives up a rename; a failed rename keeps the field', async () => {
  let ok = false;
  const { listing, calls } = make({
    rename: (p, n) => {
      calls.push(`rename ${p} ${n}`);
      return Promise.resolve(ok ? 'd/' + n : undefined);
    },
  });
  listing.update([entry('a.ipynb')]);
  const row = listing.row('d/a.ipynb')!;
  listing.startRename('d/a.ipynb');
  let input = row.querySelector<HTMLInputElement>('input.nb-rename')!;
  input.value = 'x.ipynb';
  input.dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
  assert.equal(row.querySelector('input.nb-rename'), null);
  assert.deepEqual(calls, []);
  listing.startRename('d/a.ipynb');
  input = row.querySelector<HTMLInputElement>('input.nb-rename')!;
  input.value = 'x.ipynb';
  input.dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(row.querySelector('input.nb-rename'), input, 'still editing after a failure');
  ok = true;
  input.dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(calls, ['rename d/a.ipynb x.ipynb', 'rename d/a.ipynb x.ipynb']);
  assert.equal(row.dataset.path, 'd/x.ipynb');
});

test('leaving a rename field after a failure gives up rather than retrying the same name', async () => {
  const { listing, calls } = make({
    rename: (p, n) => {
      calls.push(`rename ${p} ${n}`);
      return Promise.resolve(undefined);
    },
  });
  const other = document.createElement('button');
  listing.update([entry('a.ipynb')]);
  document.body.append(other);
  const row = listing.row('d/a.ipynb')!;
  listing.startRename('d/a.ipynb');
  const input = row.querySelector<HTMLInputElement>('input.nb-rename')!;
  input.value = 'taken.ipynb';
  input.dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(document.activeElement, input);
  other.focus(); // the user goes elsewhere
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(calls, ['rename d/a.ipynb taken.ipynb']);
  assert.equal(row.querySelector('input.nb-rename'), null);
  assert.equal(document.activeElement, other, 'the focus stays where the user put it');
  assert.equal(row.dataset.path, 'd/a.ipynb');
});

test('running notebooks are marked', () => {
  const { listing } = make();
  listing.update([entry('a.ipynb'), entry('b.ipynb')], new Set(['d/b.ipynb']));
  const badge = (p: string) => listing.row(p)!.querySelector<HTMLElement>('.nb-running')!;
  assert.equal(badge('d/a.ipynb').hidden, true);
  assert.equal(badge('d/b.ipynb').hidden, false);
  listing.setRunning(new Set(['d/a.ipynb']));
  assert.equal(badge('d/a.ipynb').hidden, false);
  assert.equal(badge('d/b.ipynb').hidden, true);
});

test('1,000 notebooks go in at once, and a poll that changes nothing changes no DOM', async () => {
  const { listing } = make();
  const many = Array.from({ length: 1000 }, (_, i) => entry(`nb${i}.ipynb`, 'notebook', i * 100));
  const records: MutationRecord[] = [];
  const observer = new window.MutationObserver((rs) => records.push(...rs));
  observer.observe(listing.element, { subtree: true, childList: true, attributes: true, characterData: true });
  listing.update(many);
  await new Promise((r) => setTimeout(r, 0));
  // Rows are built off the document and inserted with one mutation of the table body.
  assert.equal(records.length, 1);
  assert.equal(listing.paths().length, 1000);
  assert.deepEqual(listing.paths().slice(0, 3), ['d/nb0.ipynb', 'd/nb1.ipynb', 'd/nb2.ipynb']);
  records.length = 0;
  listing.update(many.map((e) => ({ ...e })));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(records.length, 0, 'an unchanged listing touches nothing');
  // One changed size: one text change; one new file: one inserted row.
  const changed = many.map((e) => ({ ...e }));
  changed[500] = { ...changed[500], size: 1 };
  changed.push(entry('nb1000.ipynb'));
  listing.update(changed);
  await new Promise((r) => setTimeout(r, 0));
  observer.disconnect();
  assert.equal(records.length, 2, records.map((r) => r.type + ' ' + (r.target as Element).nodeName).join(', '));
});
