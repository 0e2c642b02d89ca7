// The notebook page's commands, in menu order: label, menu, key bindings (Notebook 6's, in
// command mode and edit mode) and what each runs. The menus, the palette, the keys and the
// shortcuts help all come from this one list.
import { config, url } from '../../shell/config';
import { dirname } from '../../shell/saver';
import { runAllInBackground } from '../background';
import { editMetadata } from '../cellmeta';
import { openFind } from '../find';
import type { NotebookPage } from '../notebook';
import { DOWNLOADS } from '../toolbar';
import { openPalette, showShortcuts } from './palette';
import type { CommandSpec, EditContext } from './registry';

const canTab = (c: EditContext) => !c.blankBeforeCursor && !c.hasSelection;

/** notebookCommands are the page's commands; p is used only when a command runs. */
export function notebookCommands(p: NotebookPage): CommandSpec[] {
  const ops = () => p.ops;
  const k = () => p.kernelActions;
  const many = () => p.views.length > 1;
  const open = async (what: 'print' | 'copy') => {
    // Both show the file: save first what is only on the page.
    if (p.model.dirty) await p.save();
    window.open(url(config().notebookId ?? '', what), '_blank', 'noopener');
  };
  return [
    // File
    {
      id: 'new-notebook',
      label: 'New notebook',
      menu: 'File',
      run: () => void window.open(url('new') + '?dir=' + encodeURIComponent(dirname(p.path)), '_blank', 'noopener'),
    },
    { id: 'copy-notebook', label: 'Make a copy', menu: 'File', run: () => open('copy') },
    { id: 'rename', label: 'Rename…', menu: 'File', run: () => p.file.rename() },
    { id: 'save', label: 'Save and checkpoint', menu: 'File', group: true, global: ['Ctrl-S'], run: () => p.save() },
    { id: 'checkpoint', label: 'Create a checkpoint', menu: 'File', run: () => p.file.checkpoint() },
    { id: 'revert', label: 'Revert to a checkpoint…', menu: 'File', run: () => p.file.revert() },
    { id: 'print', label: 'Print view', menu: 'File', group: true, run: () => open('print') },
    ...DOWNLOADS.map((d, i): CommandSpec => ({
      id: 'download-' + d.format,
      label: 'Download as ' + d.label,
      menu: 'File',
      group: i === 0,
      run: () => p.download(d.format),
    })),
    // Edit
    { id: 'cut', label: 'Cut cells', menu: 'Edit', command: ['X'], run: () => ops().cut() },
    { id: 'copy', label: 'Copy cells', menu: 'Edit', command: ['C'], run: () => ops().copy() },
    {
      id: 'paste',
      label: 'Paste cells below',
      menu: 'Edit',
      command: ['V'],
      enabled: () => p.model.canPaste,
      run: () => ops().paste(true),
    },
    {
      id: 'paste-above',
      label: 'Paste cells above',
      menu: 'Edit',
      command: ['Shift-V'],
      enabled: () => p.model.canPaste,
      run: () => ops().paste(false),
    },
    { id: 'delete', label: 'Delete cells', menu: 'Edit', command: ['D,D'], run: () => ops().remove() },
    {
      id: 'undo-delete',
      label: 'Undo delete cells',
      menu: 'Edit',
      command: ['Z'],
      enabled: () => p.model.canUndoDelete,
      run: () => ops().undoDelete(),
    },
    {
      id: 'split',
      label: 'Split cell at cursor',
      menu: 'Edit',
      group: true,
      edit: ['Ctrl-Shift-Minus'],
      enabled: () => p.mode() === 'edit',
      run: () => ops().split(),
    },
    {
      id: 'merge',
      label: 'Merge cells (or with the cell below)',
      menu: 'Edit',
      command: ['Shift-M'],
      enabled: () => p.sel.count > 1 || p.sel.head < p.views.length - 1,
      run: () => ops().merge(),
    },
    {
      id: 'move-up',
      label: 'Move cells up',
      menu: 'Edit',
      group: true,
      command: ['Alt-Up'],
      run: () => ops().move(-1),
    },
    { id: 'move-down', label: 'Move cells down', menu: 'Edit', command: ['Alt-Down'], run: () => ops().move(1) },
    {
      id: 'find',
      label: 'Find and replace…',
      menu: 'Edit',
      group: true,
      command: ['F'],
      run: () => openFind(p),
    },
    { id: 'select-all', label: 'Select all cells', menu: 'Edit', group: true, run: () => ops().selectAll() },
    {
      id: 'extend-up',
      label: 'Extend the selection above',
      menu: 'Edit',
      command: ['Shift-Up', 'Shift-K'],
      enabled: many,
      run: () => ops().extend(-1),
    },
    {
      id: 'extend-down',
      label: 'Extend the selection below',
      menu: 'Edit',
      command: ['Shift-Down', 'Shift-J'],
      enabled: many,
      run: () => ops().extend(1),
    },
    {
      id: 'select-prev',
      label: 'Select the cell above',
      command: ['Up', 'K'],
      edit: [{ keys: 'Up', when: (c) => !!c.atFirstLine }],
      run: () => ops().step(-1),
    },
    {
      id: 'select-next',
      label: 'Select the cell below',
      command: ['Down', 'J'],
      edit: [{ keys: 'Down', when: (c) => !!c.atLastLine }],
      run: () => ops().step(1),
    },
    { id: 'edit-mode', label: 'Edit the cell', command: ['Enter'], run: () => p.select(p.sel.head, true) },
    { id: 'command-mode', label: 'Leave the editor', edit: ['Esc'], run: () => p.select(p.sel.head, false) },
    // View
    {
      id: 'palette',
      label: 'Command palette…',
      menu: 'View',
      command: ['Ctrl-Shift-P', 'P'],
      edit: ['Ctrl-Shift-P'],
      run: () => openPalette(p.commands),
    },
    {
      id: 'line-numbers',
      label: 'Toggle line numbers',
      menu: 'View',
      group: true,
      command: ['L'],
      run: () => ops().toggleLineNumbers(false),
    },
    {
      id: 'all-line-numbers',
      label: 'Toggle line numbers in all cells',
      menu: 'View',
      command: ['Shift-L'],
      run: () => ops().toggleLineNumbers(true),
    },
    // Insert
    { id: 'insert-above', label: 'Insert cell above', menu: 'Insert', command: ['A'], run: () => ops().insert(false) },
    { id: 'insert-below', label: 'Insert cell below', menu: 'Insert', command: ['B'], run: () => ops().insert(true) },
    // Cell
    {
      id: 'run',
      label: 'Run cells',
      menu: 'Cell',
      command: ['Ctrl-Enter'],
      edit: ['Ctrl-Enter'],
      run: () => ops().run(),
    },
    {
      id: 'run-select-next',
      label: 'Run cells and select below',
      menu: 'Cell',
      command: ['Shift-Enter'],
      edit: ['Shift-Enter'],
      run: () => ops().runAndAdvance(),
    },
    {
      id: 'run-insert-below',
      label: 'Run cells and insert below',
      menu: 'Cell',
      command: ['Alt-Enter'],
      edit: ['Alt-Enter'],
      run: () => ops().runInsertBelow(),
    },
    { id: 'run-all', label: 'Run all', menu: 'Cell', group: true, run: () => ops().runAll() },
    { id: 'run-above', label: 'Run all above', menu: 'Cell', run: () => ops().runAbove() },
    { id: 'run-below', label: 'Run all below', menu: 'Cell', run: () => ops().runBelow() },
    {
      id: 'run-all-background',
      label: 'Run all in the background',
      menu: 'Cell',
      run: () => runAllInBackground(p),
    },
    {
      id: 'to-code',
      label: 'Cell type: code',
      menu: 'Cell',
      group: true,
      command: ['Y'],
      run: () => ops().setType('code'),
    },
    {
      id: 'to-markdown',
      label: 'Cell type: markdown',
      menu: 'Cell',
      command: ['M'],
      run: () => ops().setType('markdown'),
    },
    { id: 'to-raw', label: 'Cell type: raw', menu: 'Cell', command: ['R'], run: () => ops().setType('raw') },
    {
      id: 'clear-output',
      label: 'Clear output',
      menu: 'Cell',
      group: true,
      run: () => ops().clearOutputs(false),
    },
    { id: 'clear-all-output', label: 'Clear all outputs', menu: 'Cell', run: () => ops().clearOutputs(true) },
    {
      id: 'edit-metadata',
      label: 'Edit tags and metadata…',
      menu: 'Cell',
      group: true,
      run: () => editMetadata(p),
    },
    {
      id: 'complete',
      label: 'Complete',
      edit: [{ keys: 'Tab', when: canTab }],
      run: () => ops().complete(),
    },
    { id: 'inspect', label: 'Inspect', edit: ['Shift-Tab'], run: () => ops().inspect() },
    // Kernel
    { id: 'interrupt', label: 'Interrupt', menu: 'Kernel', command: ['I,I'], run: () => k().interrupt() },
    { id: 'restart', label: 'Restart…', menu: 'Kernel', command: ['0,0'], run: () => k().restart(false) },
    { id: 'restart-run-all', label: 'Restart and run all…', menu: 'Kernel', run: () => k().restart(true) },
    { id: 'shutdown', label: 'Shut down…', menu: 'Kernel', run: () => k().shutdown() },
    { id: 'change-kernel', label: 'Change kernel…', menu: 'Kernel', group: true, run: () => k().change() },
    // Help
    {
      id: 'shortcuts',
      label: 'Keyboard shortcuts',
      menu: 'Help',
      command: ['H'],
      run: () => showShortcuts(p.commands),
    },
  ];
}
