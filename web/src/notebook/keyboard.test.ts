import { test } from 'node:test';
import assert from 'node:assert/strict';
import { notebookCommands } from './commands/notebook';
import { CommandRegistry, type EditContext, type KeyState, type Mode } from './commands/registry';
import type { Key } from './commands/keys';
import type { NotebookPage } from './notebook';

// The page's real commands; the page itself is not needed until one runs.
const registry = new CommandRegistry(notebookCommands({} as NotebookPage));
const resolve = (mode: Mode, k: Key, state: KeyState = {}, ctx: EditContext = {}) =>
  registry.resolve(mode, k, state, ctx);

test('Jupyter run keys in both modes', () => {
  for (const mode of ['command', 'edit'] as const) {
    assert.equal(resolve(mode, { key: 'Enter', shiftKey: true }), 'run-select-next');
    assert.equal(resolve(mode, { key: 'Enter', ctrlKey: true }), 'run');
    assert.equal(resolve(mode, { key: 'Enter', metaKey: true }), 'run');
    assert.equal(resolve(mode, { key: 'Enter', altKey: true }), 'run-insert-below');
  }
});

test('Ctrl-S saves everywhere, even outside the notebook', () => {
  for (const mode of ['command', 'edit', 'other'] as const) {
    assert.equal(resolve(mode, { key: 's', ctrlKey: true }), 'save');
  }
  assert.equal(resolve('other', { key: 'a' }), null);
  assert.equal(resolve('other', { key: 'Enter', shiftKey: true }), null);
});

test('command mode single keys', () => {
  const cases: [string, string][] = [
    ['a', 'insert-above'],
    ['b', 'insert-below'],
    ['m', 'to-markdown'],
    ['y', 'to-code'],
    ['r', 'to-raw'],
    ['x', 'cut'],
    ['c', 'copy'],
    ['v', 'paste'],
    ['k', 'select-prev'],
    ['j', 'select-next'],
    ['ArrowUp', 'select-prev'],
    ['ArrowDown', 'select-next'],
    ['z', 'undo-delete'],
    ['Enter', 'edit-mode'],
  ];
  for (const [key, cmd] of cases) {
    assert.equal(resolve('command', { key }), cmd, key);
  }
  // The browser keeps its own Ctrl-C.
  assert.equal(resolve('command', { key: 'c', ctrlKey: true }), null);
});

test('DD deletes, II interrupts, 00 restarts; another key between cancels', () => {
  const s: KeyState = {};
  assert.equal(resolve('command', { key: 'd' }, s), null);
  assert.equal(resolve('command', { key: 'd' }, s), 'delete');
  assert.equal(resolve('command', { key: 'd' }, s), null);
  assert.equal(resolve('command', { key: 'j' }, s), 'select-next');
  assert.equal(resolve('command', { key: 'd' }, s), null);
  assert.equal(resolve('command', { key: 'i' }, s), null);
  assert.equal(resolve('command', { key: 'i' }, s), 'interrupt');
  assert.equal(resolve('command', { key: '0' }, s), null);
  assert.equal(resolve('command', { key: '0' }, s), 'restart');
});

test('edit mode: letters type, Esc leaves, Tab completes after text and indents after blanks', () => {
  assert.equal(resolve('edit', { key: 'a' }), null);
  assert.equal(resolve('edit', { key: 'd' }), null);
  assert.equal(resolve('edit', { key: 'Enter' }), null);
  assert.equal(resolve('edit', { key: 'Escape' }), 'command-mode');
  assert.equal(resolve('edit', { key: 'Tab' }, {}, { blankBeforeCursor: false }), 'complete');
  assert.equal(resolve('edit', { key: 'Tab' }, {}, { blankBeforeCursor: true }), null);
  assert.equal(resolve('edit', { key: 'Tab' }, {}, { hasSelection: true }), null);
  assert.equal(resolve('edit', { key: 'Tab', shiftKey: true }), 'inspect');
  assert.equal(resolve('edit', { key: 'ArrowUp' }, {}, { atFirstLine: true }), 'select-prev');
  assert.equal(resolve('edit', { key: 'ArrowUp' }, {}, { atFirstLine: false }), null);
  assert.equal(resolve('edit', { key: 'ArrowDown' }, {}, { atLastLine: true }), 'select-next');
});

test('while completing, the popup owns Enter, arrows, Tab and Esc', () => {
  const ctx = { completing: true, atFirstLine: true, atLastLine: true };
  for (const key of ['Enter', 'ArrowUp', 'ArrowDown', 'Tab', 'Escape']) {
    assert.equal(resolve('edit', { key }, {}, ctx), null, key);
  }
  assert.equal(resolve('edit', { key: 's', ctrlKey: true }, {}, ctx), 'save');
});
