import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { NotebookPage } from '../notebook';
import { keyName } from './keys';
import { notebookCommands } from './notebook';
import { CommandRegistry, MENUS, type KeyState } from './registry';

const registry = new CommandRegistry(notebookCommands({} as NotebookPage));

test('no two commands share a key in a mode', () => {
  assert.deepEqual(registry.clashes(), []);
  const r = new CommandRegistry([
    { id: 'a', label: 'A', command: ['X'], run: () => undefined },
    { id: 'b', label: 'B', command: ['X'], run: () => undefined },
  ]);
  assert.deepEqual(r.clashes(), ['command X: a and b']);
});

test('key names follow Notebook 6', () => {
  assert.equal(keyName({ key: 'm', shiftKey: false }), 'M');
  assert.equal(keyName({ key: 'M', shiftKey: true }), 'Shift-M');
  assert.equal(keyName({ key: '_', shiftKey: true, ctrlKey: true }), 'Ctrl-Shift-Minus');
  assert.equal(keyName({ key: 'ArrowDown', shiftKey: true }), 'Shift-Down');
  assert.equal(keyName({ key: 'p', metaKey: true, shiftKey: true }), 'Ctrl-Shift-P');
});

test('the new bindings resolve in their modes only', () => {
  const cases: [string, Parameters<CommandRegistry['resolve']>[1], string | null][] = [
    ['command', { key: 'ArrowDown', shiftKey: true }, 'extend-down'],
    ['command', { key: 'J', shiftKey: true }, 'extend-down'],
    ['command', { key: 'K', shiftKey: true }, 'extend-up'],
    ['command', { key: 'M', shiftKey: true }, 'merge'],
    ['command', { key: 'V', shiftKey: true }, 'paste-above'],
    ['command', { key: 'l' }, 'line-numbers'],
    ['command', { key: 'L', shiftKey: true }, 'all-line-numbers'],
    ['command', { key: 'h' }, 'shortcuts'],
    ['command', { key: 'P', shiftKey: true, ctrlKey: true }, 'palette'],
    ['edit', { key: 'P', shiftKey: true, ctrlKey: true }, 'palette'],
    ['edit', { key: '_', shiftKey: true, ctrlKey: true }, 'split'],
    ['command', { key: '_', shiftKey: true, ctrlKey: true }, null],
    ['edit', { key: 'M', shiftKey: true }, null],
    ['edit', { key: 'h' }, null],
    ['other', { key: 'h' }, null],
  ];
  for (const [mode, key, want] of cases) {
    assert.equal(registry.resolve(mode as 'command', key), want, `${mode} ${keyName(key)}`);
  }
  const s: KeyState = {};
  assert.equal(registry.resolve('command', { key: 'd' }, s), null);
  assert.equal(registry.resolve('command', { key: 'd' }, s), 'delete');
});

test('every menu has commands, every command in a menu has a label, and the keys show', () => {
  for (const m of MENUS) {
    assert.ok(registry.inMenu(m).length > 0, m);
  }
  assert.deepEqual(registry.keys('delete', 'command'), ['D,D']);
  assert.deepEqual(registry.keys('save', 'edit'), ['Ctrl-S']);
  assert.deepEqual(registry.keys('split', 'edit'), ['Ctrl-Shift-Minus']);
});

test('a disabled command does not run, and run says so', () => {
  let ran = 0;
  const r = new CommandRegistry([
    { id: 'on', label: 'On', run: () => void ran++ },
    { id: 'off', label: 'Off', enabled: () => false, run: () => void ran++ },
    { id: 'no', label: 'No', run: () => false },
  ]);
  assert.equal(r.run('on'), true);
  assert.equal(r.run('off'), false);
  assert.equal(r.run('no'), false);
  assert.equal(r.run('unknown'), false);
  assert.equal(ran, 1);
});
